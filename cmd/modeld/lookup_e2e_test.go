package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPromptLookupMetrics: a daemon started with --prompt-lookup drafts
// for greedy completions whose output repeats itself, and /metrics shows
// the drafts, the drafted and the kept tokens under vLLM's names; kept
// never exceeds drafted.
func TestPromptLookupMetrics(t *testing.T) {
	_, base, logs := startDaemon(t, chatHome(t), "--prompt-lookup", "8")
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	for _, p := range []string{"Once upon a time", "Hello world, tell me a story about the water", "One two three, one two three, one two"} {
		body := `{"model":"t/raw","prompt":"` + p + `","max_tokens":200,"temperature":0}`
		res, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("completion: %d %s", res.StatusCode, b)
		}
	}
	values, types := scrape(t, base)
	get := func(name string) float64 {
		t.Helper()
		if types[name] != "counter" {
			t.Errorf("/metrics has %s of type %q, want counter", name, types[name])
		}
		v, ok := values[name+`{model_name="t/raw"}`]
		if !ok {
			t.Errorf("/metrics lacks %s for t/raw", name)
		}
		return v
	}
	drafts := get("vllm:spec_decode_num_drafts_total")
	drafted := get("vllm:spec_decode_num_draft_tokens_total")
	kept := get("vllm:spec_decode_num_accepted_tokens_total")
	if drafts == 0 || drafted < drafts || kept > drafted {
		t.Errorf("%v drafts of %v tokens, %v kept", drafts, drafted, kept)
	}
}
