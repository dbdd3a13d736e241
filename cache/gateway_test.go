package cache

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// occupantInst is a fakeInst that reports its own queue and KV cache.
type occupantInst struct {
	*fakeInst
	occ Occupancy
	err error
}

func (o *occupantInst) Occupancy() (Occupancy, error) { return o.occ, o.err }

// TestGatewayGauges: the model server protocol's gauges per model — the
// cache's queue plus the requests waiting inside an instance are queued,
// the rest of the slot holders run, and instances with a KV cache report
// its use (the others hold none: 0); an instance that cannot answer keeps
// the cache's counts.
func TestGatewayGauges(t *testing.T) {
	l := newFakeLoader()
	l.slots = 2
	l.wrap = func(f *fakeInst) Instance {
		switch f.id {
		case "chat":
			return &occupantInst{fakeInst: f, occ: Occupancy{Waiting: 1, KVUsage: 0.25, HasKV: true}}
		case "mute":
			return &occupantInst{fakeInst: f, err: errors.New("runner gone")}
		}
		return f
	}
	c := newTestCache(t, testConfig(), specs{"chat": {}, "embed": {}, "mute": {}}, l)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	h1, h2 := mustAcquire(t, c, "chat"), mustAcquire(t, c, "chat")
	queuedDone := make(chan struct{})
	go func() {
		defer close(queuedDone)
		h, err := c.Acquire(context.Background(), "chat", AcquireOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		h.Release()
	}()
	waitFor(c, func() bool { return queued(c, "chat") == 1 })
	use(t, c, "embed")
	hm := mustAcquire(t, c, "mute")

	want := `
# HELP vllm:kv_cache_usage_perc Fraction of the model's KV cache that running requests hold (1 = full).
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="chat"} 0.25
vllm:kv_cache_usage_perc{model_name="embed"} 0
vllm:kv_cache_usage_perc{model_name="mute"} 0
# HELP vllm:num_requests_running Requests the model is serving now.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="chat"} 1
vllm:num_requests_running{model_name="embed"} 0
vllm:num_requests_running{model_name="mute"} 1
# HELP vllm:num_requests_waiting Requests waiting for a slot of the model or for its load.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="chat"} 2
vllm:num_requests_waiting{model_name="embed"} 0
vllm:num_requests_waiting{model_name="mute"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(c.m.loads.WithLabelValues("chat", "ok")); got != 1 {
		t.Errorf("loads of chat = %v, want 1", got)
	}
	h1.Release()
	h2.Release()
	hm.Release()
	<-queuedDone
}
