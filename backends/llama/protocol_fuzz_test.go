package llama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/modeld/modeld/backends/llama/wire"
	"io"
	"testing"
)

// viaJSON is s as it reads back from JSON (invalid UTF-8 bytes become U+FFFD).
func viaJSON(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// FuzzNDJSONEvents: the runner's /generate stream (one JSON event per line)
// carries any generated text and any error message: every event is one line,
// and the daemon's reader gives back the events written, in order, ending
// with the final one.
func FuzzNDJSONEvents(f *testing.F) {
	for _, s := range []string{"hello", "a\nb", "}\n{\"Done\":true}\n", "\r\n", "\u2028", "<|im_end|>", "\x00", "\xff", `\"`} {
		f.Add(s, "runner: "+s, int32(7))
	}
	f.Fuzz(func(t *testing.T, text, errMsg string, tok int32) {
		sent := []Event{
			{Token: tok, Text: text},
			{Token: tok + 1, Text: ""},
			{Token: tok + 2, Text: text + text},
			{Token: -1, Done: true, Finish: FinishError, Err: errors.New(errMsg), Usage: Usage{PromptTokens: 3, CompletionTokens: 3}},
		}
		var stream bytes.Buffer
		for _, ev := range sent {
			var line bytes.Buffer
			if err := wire.EncodeLine(&line, wire.FromEvent(ev)); err != nil {
				t.Fatalf("encode %+v: %v", ev, err)
			}
			b := line.Bytes()
			if bytes.IndexByte(b, '\n') != len(b)-1 {
				t.Fatalf("event %+v is not one line: %q", ev, b)
			}
			stream.Write(b)
		}
		out := make(chan Event, len(sent)+1)
		(&Runner{live: newLiveness()}).relay(context.Background(), io.NopCloser(&stream), 3, 1, out)
		var got []Event
		for ev := range out {
			got = append(got, ev)
		}
		if len(got) != len(sent) {
			t.Fatalf("%d events read back, %d written", len(got), len(sent))
		}
		for i, ev := range got {
			want := sent[i]
			if ev.Token != want.Token || ev.Text != viaJSON(want.Text) || ev.Done != want.Done || ev.Finish != want.Finish || ev.Usage != want.Usage {
				t.Fatalf("event %d: %+v, want %+v", i, ev, want)
			}
		}
		last := got[len(got)-1]
		if last.Err == nil || last.Err.Error() != viaJSON(errMsg) {
			t.Fatalf("final error %v, want %q", last.Err, errMsg)
		}
	})
}
