package cache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
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
			return &occupantInst{fakeInst: f, occ: Occupancy{Waiting: 1, KVHeld: 1024, KVTotal: 4096}}
		case "chat2":
			return &occupantInst{fakeInst: f, occ: Occupancy{KVHeld: 3072, KVTotal: 4096}}
		case "mute":
			return &occupantInst{fakeInst: f, err: errors.New("runner gone")}
		}
		return f
	}
	c := newTestCache(t, testConfig(), specs{"chat": {}, "chat2": {}, "embed": {}, "mute": {}}, l)
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
	use(t, c, "chat2")

	// The host's series come first: waiting and running summed, the KV
	// cache (1024+3072)/(4096+4096) over the two chat models.
	want := `
# HELP vllm:kv_cache_usage_perc Fraction of the model's KV cache that running requests hold (1 = full); model_name="" is the host: tokens held over tokens there are, all loaded chat models.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name=""} 0.5
vllm:kv_cache_usage_perc{model_name="chat"} 0.25
vllm:kv_cache_usage_perc{model_name="chat2"} 0.75
vllm:kv_cache_usage_perc{model_name="embed"} 0
vllm:kv_cache_usage_perc{model_name="mute"} 0
# HELP vllm:num_requests_running Requests the model is serving now; model_name="" is the host: all models.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name=""} 2
vllm:num_requests_running{model_name="chat"} 1
vllm:num_requests_running{model_name="chat2"} 0
vllm:num_requests_running{model_name="embed"} 0
vllm:num_requests_running{model_name="mute"} 1
# HELP vllm:num_requests_waiting Requests waiting for a slot of the model or for its load; model_name="" is the host: all models.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=""} 2
vllm:num_requests_waiting{model_name="chat"} 2
vllm:num_requests_waiting{model_name="chat2"} 0
vllm:num_requests_waiting{model_name="embed"} 0
vllm:num_requests_waiting{model_name="mute"} 0
# HELP vllm:cache_config_info The KV cache of the loaded chat models: num_gpu_blocks blocks of block_size tokens.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="512"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info"); err != nil {
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

// gatherText is the text of the named families on reg.
func gatherText(t *testing.T, reg prometheus.Gatherer, names ...string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if slices.Contains(names, mf.GetName()) {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

// TestGatewayGaugesIdleHost: with nothing loaded the three families are
// there, the host's series at 0, so a picker finds the host ready and idle;
// the store's models show their zeros; no model is loaded, one more may be.
func TestGatewayGaugesIdleHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, testConfig(), specs{"a": {}}, newFakeLoader())
		c.listed = func() []string { return []string{"a", "b"} }
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := gatherText(t, reg, "vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:lora_requests_info")
		at := strconv.FormatFloat(float64(time.Now().Unix()), 'e', -1, 64)
		for _, line := range []string{
			`vllm:num_requests_waiting{model_name=""} 0`,
			`vllm:num_requests_running{model_name=""} 0`,
			`vllm:kv_cache_usage_perc{model_name=""} 0`,
			`vllm:num_requests_waiting{model_name="a"} 0`,
			`vllm:num_requests_running{model_name="b"} 0`,
			`vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} ` + at,
		} {
			if !strings.Contains(got, line+"\n") {
				t.Errorf("/metrics lacks %s; it has:\n%s", line, got)
			}
		}
	})
}

// TestGatewayLoRAInfo: vllm:lora_requests_info names the loaded and the
// loading models, with the configured most loaded models, and its value is
// the time they last changed: a scrape with nothing new keeps it.
func TestGatewayLoRAInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		cfg := testConfig()
		cfg.MaxLoaded = 3
		c := newTestCache(t, cfg, specs{"m/b": {}, "m/a": {}, "m/c": {}}, l)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		lora := func() string { return gatherText(t, reg, "vllm:lora_requests_info") }
		at := func(d time.Duration) string {
			return strconv.FormatFloat(float64(time.Now().Add(d).Unix()), 'e', -1, 64)
		}
		use(t, c, "m/b")
		use(t, c, "m/a")
		start := time.Now()
		l.gate = make(chan struct{})
		loading := make(chan error, 1)
		go func() {
			h, err := c.Acquire(context.Background(), "m/c", AcquireOptions{})
			if err == nil {
				h.Release()
			}
			loading <- err
		}()
		<-l.started // m/b
		<-l.started // m/a
		<-l.started // m/c
		want := `vllm:lora_requests_info{max_lora="3",running_lora_adapters="m/a,m/b",waiting_lora_adapters="m/c"} `
		if got := lora(); !strings.Contains(got, want+at(0)) {
			t.Errorf("while m/c loads:\n%s\nwant %s%s", got, want, at(0))
		}
		advance(time.Second) // still the same: the value stays
		if got := lora(); !strings.Contains(got, want+at(-time.Second)) {
			t.Errorf("a second later, nothing changed:\n%s\nwant the time of the change, %v", got, start)
		}
		close(l.gate)
		if err := <-loading; err != nil {
			t.Fatal(err)
		}
		want = `vllm:lora_requests_info{max_lora="3",running_lora_adapters="m/a,m/b,m/c",waiting_lora_adapters=""} `
		if got := lora(); !strings.Contains(got, want+at(0)) {
			t.Errorf("once m/c is loaded:\n%s\nwant %s%s", got, want, at(0))
		}
	})
}

// TestGatewayGaugesLinger: an unloaded model's series stay at 0 for
// gatewayLinger, so a spec labelled with its id reads 0 rather than the
// last value it saw, then go.
func TestGatewayGaugesLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, testConfig(), specs{"m": {}}, newFakeLoader())
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		h := mustAcquire(t, c, "m")
		if got := gatherText(t, reg, "vllm:num_requests_running"); !strings.Contains(got, `vllm:num_requests_running{model_name="m"} 1`) {
			t.Fatalf("while m runs:\n%s", got)
		}
		h.Release()
		if err := c.Unload(context.Background(), "m", true); err != nil {
			t.Fatal(err)
		}
		waitFor(c, func() bool { return len(c.entries) == 0 && len(c.retiring) == 0 })
		advance(gatewayLinger - time.Second)
		if got := gatherText(t, reg, "vllm:num_requests_running"); !strings.Contains(got, `vllm:num_requests_running{model_name="m"} 0`) {
			t.Errorf("just before the linger ends:\n%s", got)
		}
		advance(time.Second)
		if got := gatherText(t, reg, "vllm:num_requests_running"); strings.Contains(got, `model_name="m"`) {
			t.Errorf("after the linger:\n%s", got)
		}
	})
}
