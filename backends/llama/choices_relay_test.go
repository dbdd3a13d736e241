package llama

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// TestRelayChoicesAndLogprobs: the client relays an n-choice stream up to
// every choice's final event (not the first), with each token's logprobs
// intact, bytes that are not UTF-8 included; an event line written before
// logprobs existed still reads, with none.
func TestRelayChoicesAndLogprobs(t *testing.T) {
	lp := &backends.Logprobs{
		TokenLogprob: backends.TokenLogprob{ID: 5, Bytes: []byte{0xe2, 0x82}, Logprob: -0.25},
		Top:          []backends.TokenLogprob{{ID: 5, Bytes: []byte{0xe2, 0x82}, Logprob: -0.25}, {ID: 9, Bytes: []byte("ab"), Logprob: -1.5}},
	}
	sent := []Event{
		{Token: 5, Text: "", Logprobs: lp, Index: 1},
		{Token: 6, Text: "x", Index: 0},
		{Token: -1, Done: true, Finish: FinishStop, Index: 1, Usage: Usage{PromptTokens: 3, CompletionTokens: 2}},
		{Token: 7, Text: "y", Index: 0},
		{Token: -1, Done: true, Finish: FinishLength, Index: 0, Usage: Usage{PromptTokens: 3, CompletionTokens: 2}},
	}
	var stream bytes.Buffer
	for _, ev := range sent {
		if err := wire.EncodeLine(&stream, wire.FromEvent(ev)); err != nil {
			t.Fatal(err)
		}
	}
	stream.WriteString(`{"Token":8,"Text":"after","Done":false}` + "\n") // past the last choice: not read
	out := make(chan Event, len(sent)+2)
	(&Runner{live: newLiveness()}).relay(context.Background(), io.NopCloser(&stream), 3, 2, out)
	var got []Event
	for ev := range out {
		got = append(got, ev)
	}
	if len(got) != len(sent) {
		t.Fatalf("%d events relayed, want %d: %+v", len(got), len(sent), got)
	}
	for i, ev := range got {
		w := sent[i]
		if ev.Token != w.Token || ev.Index != w.Index || ev.Done != w.Done || ev.Finish != w.Finish || (ev.Logprobs == nil) != (w.Logprobs == nil) {
			t.Errorf("event %d: %+v, want %+v", i, ev, w)
		}
	}
	g := got[0].Logprobs
	if g.ID != 5 || !bytes.Equal(g.Bytes, lp.Bytes) || g.Logprob != -0.25 || len(g.Top) != 2 || !bytes.Equal(g.Top[1].Bytes, []byte("ab")) || g.Top[1].Logprob != -1.5 {
		t.Errorf("logprobs came back as %+v", g)
	}

	old := bytes.NewBufferString(`{"Token":3,"Text":"a"}` + "\n" + `{"Token":-1,"Done":true,"Finish":"stop","Usage":{"PromptTokens":1,"CompletionTokens":1,"CachedTokens":0}}` + "\n")
	out = make(chan Event, 3)
	(&Runner{live: newLiveness()}).relay(context.Background(), io.NopCloser(old), 1, 1, out)
	var evs []Event
	for ev := range out {
		evs = append(evs, ev)
	}
	if len(evs) != 2 || evs[0].Logprobs != nil || evs[0].Index != 0 || !evs[1].Done || !slices.Equal([]string{evs[0].Text}, []string{"a"}) {
		t.Errorf("an old stream read as %+v", evs)
	}
}
