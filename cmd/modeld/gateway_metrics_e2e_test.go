package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// gatewayProtocol is the model server protocol of the Gateway API Inference
// Extension (what its endpoint picker, and llm-d's, scrape): each metric it
// schedules on, the name its default configuration reads, and the type.
var gatewayProtocol = []struct{ metric, name, typ string }{
	{"TotalQueuedRequests", "vllm:num_requests_waiting", "gauge"},
	{"TotalRunningRequests", "vllm:num_requests_running", "gauge"},
	{"KVCacheUtilization", "vllm:kv_cache_usage_perc", "gauge"},
}

// scrape reads the daemon's /metrics: the value of each series line and the
// type of each family.
func scrape(t *testing.T, base string) (values map[string]float64, types map[string]string) {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	values, types = map[string]float64{}, map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		values[line[:i]] = v
	}
	return values, types
}

// TestGatewayMetricsAgainstDaemon: with two chat slots and three streams,
// a real load shows two requests running and one queued under the
// protocol's names and types, a KV cache in use, and per-model load,
// request and token counters; cancelling the streams counts three
// cancelled generations and leaves nothing running or queued.
func TestGatewayMetricsAgainstDaemon(t *testing.T) {
	_, base, logs := startDaemon(t, longChatHome(t), "--chat-slots", "2", "--context-size", "16384")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	a, b := openStream(t, base, "t/long", 15000), openStream(t, base, "t/long", 15000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	third := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
			`{"model":"t/long","stream":true,"max_tokens":15000,"messages":[{"role":"user","content":"Tell me a long story."}]}`))
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		third <- err
	}()
	// The runner admits a request between two decode steps: until then it
	// waits inside the runner, and counts as waiting.
	waitMetric(t, base, `vllm:num_requests_waiting{model_name="t/long"} 1`)
	waitMetric(t, base, `vllm:num_requests_running{model_name="t/long"} 2`)
	for range 5 { // tokens flow
		if !a.next() {
			t.Fatal("the first stream ended early")
		}
	}
	values, types := scrape(t, base)
	for _, p := range gatewayProtocol {
		if types[p.name] != p.typ {
			t.Errorf("%s: /metrics has %s of type %q, want %q", p.metric, p.name, types[p.name], p.typ)
		}
	}
	if v := values[`vllm:num_requests_running{model_name="t/long"}`]; v != 2 {
		t.Errorf("running = %v, want 2 (the third request waits for a slot)", v)
	}
	if v := values[`vllm:kv_cache_usage_perc{model_name="t/long"}`]; v <= 0 || v > 1 {
		t.Errorf("KV cache usage = %v, want a fraction in (0, 1] while two streams generate", v)
	}
	for _, series := range []string{
		`modeld_model_loads_total{model="t/long",result="ok"}`,
		`modeld_model_requests_total{model="t/long"}`,
		`modeld_prompt_tokens_total{model="t/long"}`,
		`modeld_completion_tokens_total{model="t/long"}`,
		`modeld_generations_cancelled_total{model="t/long"}`,
	} {
		if _, ok := values[series]; !ok {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	cancel()
	a.res.Body.Close()
	b.res.Body.Close()
	<-third
	waitMetric(t, base, `modeld_generations_cancelled_total{model="t/long"} 2`)
	waitMetric(t, base, `vllm:num_requests_running{model_name="t/long"} 0`)
	waitMetric(t, base, `vllm:num_requests_waiting{model_name="t/long"} 0`)
	values, _ = scrape(t, base)
	if v := values[`modeld_completion_tokens_total{model="t/long"}`]; v < 4 {
		t.Errorf("completion tokens after two cancelled streams = %v, want at least the first stream's 4", v)
	}
	if v := values[`modeld_prompt_tokens_total{model="t/long"}`]; v <= 0 {
		t.Errorf("prompt tokens after two cancelled streams = %v", v)
	}
	if v := values[`vllm:kv_cache_usage_perc{model_name="t/long"}`]; v != 0 {
		t.Errorf("KV cache usage with nothing running = %v, want 0", v)
	}
}
