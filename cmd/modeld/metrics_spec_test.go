package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/modeld/modeld/backends/llama"
)

// The speculative-decoding counters add what each runner reading has
// beyond the last one, per model, and a loaded model shows its zeros.
func TestSpecDecodeMetrics(t *testing.T) {
	m := newSpecDecodeMetrics()
	m.loaded("a")
	if got := testutil.ToFloat64(m.drafted.WithLabelValues("a")); got != 0 {
		t.Fatalf("a loaded model's drafted tokens = %v", got)
	}
	first := llama.Stats{Drafts: 2, DraftTokens: 16, AcceptedTokens: 9}
	m.add("a", llama.Stats{}, first)
	m.add("a", first, llama.Stats{Drafts: 5, DraftTokens: 30, AcceptedTokens: 20})
	m.add("b", llama.Stats{}, llama.Stats{Drafts: 1, DraftTokens: 8, AcceptedTokens: 8})
	for _, c := range []struct {
		name, model string
		got, want   float64
	}{
		{"drafts", "a", testutil.ToFloat64(m.drafts.WithLabelValues("a")), 5},
		{"drafted", "a", testutil.ToFloat64(m.drafted.WithLabelValues("a")), 30},
		{"accepted", "a", testutil.ToFloat64(m.accepted.WithLabelValues("a")), 20},
		{"accepted", "b", testutil.ToFloat64(m.accepted.WithLabelValues("b")), 8},
	} {
		if c.got != c.want {
			t.Errorf("%s of %s = %v, want %v", c.name, c.model, c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.accepted, "vllm:spec_decode_num_accepted_tokens_total"); n != 2 {
		t.Errorf("%d accepted-token series, want 2", n)
	}
}
