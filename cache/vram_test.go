package cache

import (
	"context"
	"testing"
)

// An instance that reports where it runs but no VRAM measurement keeps its
// estimate in the budget; one that fell back to the CPU holds none; a
// measurement replaces the estimate. Unloading gives it all back.
func TestPlacementKeepsVRAMEstimate(t *testing.T) {
	l := newFakeLoader()
	places := map[string]Placement{
		"est":      {Device: "cuda:0", GPUShare: 1},            // no measurement
		"fallback": {Device: "cpu"},                            // the GPU load fell back
		"measured": {Device: "cuda:0", GPUShare: 1, VRAM: 250}, // a real reading
		"nodevice": {GPUShare: 0.5},                            // keeps the Spec's device
	}
	l.wrap = func(f *fakeInst) Instance { return &placedInst{fakeInst: f, place: places[f.id]} }
	cfg := testConfig()
	cfg.VRAM = map[string]int64{"cuda:0": 1000, "cuda:1": 1000}
	c := newTestCache(t, cfg, specs{
		"est":      {Device: "cuda:0", GPUShare: 1, VRAM: 400, RAM: 10},
		"fallback": {Device: "cuda:1", GPUShare: 1, VRAM: 400, RAM: 10},
		"measured": {Device: "cuda:0", GPUShare: 1, VRAM: 300, RAM: 10},
		"nodevice": {Device: "cuda:1", GPUShare: 0.5, VRAM: 100, RAM: 10},
	}, l)

	steps := []struct {
		do     func()
		cuda0  int64
		cuda1  int64
		states string
	}{
		{func() { use(t, c, "est") }, 400, 0, "est"},
		{func() { use(t, c, "fallback") }, 400, 0, "est,fallback"},
		{func() { use(t, c, "measured") }, 650, 0, "est,fallback,measured"},
		{func() { use(t, c, "nodevice") }, 650, 100, "est,fallback,measured,nodevice"},
		{func() { unload(t, c, "est") }, 250, 100, "fallback,measured,nodevice"},
		{func() { unload(t, c, "measured") }, 0, 100, "fallback,nodevice"},
		{func() { unload(t, c, "nodevice") }, 0, 0, "fallback"},
	}
	for i, st := range steps {
		st.do()
		used := c.VRAMUsed()
		if used["cuda:0"] != st.cuda0 || used["cuda:1"] != st.cuda1 {
			t.Fatalf("step %d: VRAM used %v, want cuda:0 %d, cuda:1 %d", i, used, st.cuda0, st.cuda1)
		}
		s := c.Snapshot()
		if s.VRAM["cuda:0"].UsedBytes != st.cuda0 || s.VRAM["cuda:1"].UsedBytes != st.cuda1 {
			t.Fatalf("step %d: snapshot VRAM %+v", i, s.VRAM)
		}
		var ids string
		for _, m := range s.Models {
			if ids != "" {
				ids += ","
			}
			ids += m.ID
			if m.ID == "fallback" && (m.Device != "cpu" || m.VRAMBytes != 0 || m.GPUShare != 0) {
				t.Fatalf("fallback shows %+v, want cpu with no VRAM", m)
			}
		}
		if ids != st.states {
			t.Fatalf("step %d: loaded %s, want %s", i, ids, st.states)
		}
	}
}

// The estimate a Resolver attaches is shown with the model.
func TestSnapshotShowsEstimate(t *testing.T) {
	l := newFakeLoader()
	type parts struct{ Weights, KV int64 }
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 10, Estimate: parts{7, 3}}}, l)
	use(t, c, "a")
	if m := c.Snapshot().Models; len(m) != 1 || m[0].Estimate != (parts{7, 3}) {
		t.Fatalf("models = %+v, want the estimate's parts", m)
	}
}

func unload(t *testing.T, c *Cache, id string) {
	t.Helper()
	if err := c.Unload(context.Background(), id, true); err != nil {
		t.Fatalf("Unload(%q): %v", id, err)
	}
}
