package engine

import (
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestReasoningTokensCounted: the final event's usage counts the tokens of
// the thinking block (its markers and a token whose text is held inside
// it), not the events that carried reasoning text, and none of the answer.
func TestReasoningTokensCounted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inside bool
		pieces []string
		want   int
	}{
		{"model opens", false, []string{"<think>", "Let", " me", "", " see", "</think>", "\n\n", "Hi", "!"}, 6},
		{"prompt opened", true, []string{"Let", " me", "</", "think>", "Hi"}, 4},
		{"no block", false, []string{"Hi", " there"}, 0},
	} {
		in := make(chan Event, len(tc.pieces)+1)
		for i, p := range tc.pieces {
			in <- Event{Token: int32(i), Text: p}
		}
		in <- Event{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{CompletionTokens: len(tc.pieces) + 1}}
		close(in)
		var last Event
		for ev := range reasoningEvents(in, tc.inside) {
			last = ev
		}
		if !last.Done || last.Usage.ReasoningTokens != tc.want {
			t.Errorf("%s: reasoning tokens %d, want %d (%+v)", tc.name, last.Usage.ReasoningTokens, tc.want, last)
		}
	}
}
