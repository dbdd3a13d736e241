package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
// request and token counters; cancelling the streams counts them as
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
	waitMetric(t, base, `vllm:num_requests_running{model_name="t/long"} 0`)
	waitMetric(t, base, `vllm:num_requests_waiting{model_name="t/long"} 0`)
	// The two streams are cancelled generations. The third request is one
	// too when the daemon saw its client leave only after a freed slot had
	// admitted it (which way it goes is the scheduler's luck); cancelled
	// while it waited, it never generated and is not counted.
	poll(t, "two or three cancelled generations in /metrics", func() bool {
		values, _ = scrape(t, base)
		return values[`modeld_generations_cancelled_total{model="t/long"}`] >= 2
	})
	if v := values[`modeld_generations_cancelled_total{model="t/long"}`]; v > 3 {
		t.Errorf("cancelled generations = %v, want 2 or 3", v)
	}
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

// TestRefusedScrapesBounded, from a stranger's side: 10,000 scrapes of
// /metrics without the key are each refused with 401, and write at most
// refusedScrapeBurst lines plus one per refusedScrapeEvery they took; a
// refusal of another route is still logged. With the key, a daemon with
// nothing loaded shows the host's series at 0 and no loaded model.
func TestRefusedScrapesBounded(t *testing.T) {
	const key = "mk-scrape-51c0e2"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	refused, marker := 0, make(chan struct{})
	_, base := startDaemonLines(t, t.TempDir(), func(line string, _ bool) {
		if !strings.Contains(line, `"request refused"`) {
			return
		}
		if strings.Contains(line, `"/v1/models"`) {
			close(marker)
			return
		}
		mu.Lock()
		refused++
		mu.Unlock()
	}, "--api-key-file", keyFile)
	start := time.Now()
	for i := range 10000 {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("scrape %d without the key: %d, want 401", i, res.StatusCode)
		}
	}
	took := time.Since(start)
	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	<-marker // the log is read up to here: every scrape's line was seen
	mu.Lock()
	got := refused
	mu.Unlock()
	ceiling := refusedScrapeBurst + int(took/refusedScrapeEvery) + 1
	if got < 1 || got > ceiling {
		t.Errorf("10000 refused scrapes in %v wrote %d log lines, want 1 to %d", took, got, ceiling)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("scrape with the key: %d %v", res.StatusCode, err)
	}
	for _, line := range []string{
		`vllm:num_requests_waiting{model_name=""} 0`,
		`vllm:num_requests_running{model_name=""} 0`,
		`vllm:kv_cache_usage_perc{model_name=""} 0`,
		`",running_lora_adapters="",waiting_lora_adapters=""}`,
	} {
		if !strings.Contains(string(b), line) {
			t.Errorf("an idle daemon's /metrics lacks %s:\n%s", line, b)
		}
	}
}
