package gatewaytest

import (
	"testing"
)

// TestLoadModel: over four simulated hosts, the documented picker keeps
// each model on fewer hosts than random routing does (fewer loads) and
// reads more of each prompt from kept KV; every request is served.
func TestLoadModel(t *testing.T) {
	const n = 4
	wl := AgentWorkload(n)
	got := map[string]Result{}
	for _, r := range Routings {
		res, err := Simulate(t.Context(), r.Config, n, AgentHost, wl)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if res.Requests != wl.Users*wl.Turns {
			t.Errorf("%s: %d requests served, want %d", r.Name, res.Requests, wl.Users*wl.Turns)
		}
		t.Logf("%d hosts, %s: %v", n, r.Name, res)
		got[r.Name] = res
	}
	aff, rnd := got["picker, model affinity"], got["random"]
	if aff.Loads >= rnd.Loads {
		t.Errorf("model loads: %d with affinity, %d at random; want fewer with affinity", aff.Loads, rnd.Loads)
	}
	if aff.CacheHit <= rnd.CacheHit {
		t.Errorf("prefix-cache hit: %.2f with affinity, %.2f at random; want more with affinity", aff.CacheHit, rnd.CacheHit)
	}
}
