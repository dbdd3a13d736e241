package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modeld/modeld/backends"
)

// BenchmarkEventLine is the runner hop's encoding cost of one streamed
// token: the runner's AppendEventLine of the event and the daemon's
// ParseEventLine of the line back into a backends.Event (the socket write
// and read come on top).
func BenchmarkEventLine(b *testing.B) {
	ev := backends.Event{Token: 1234, Text: " tokens"}
	line := make([]byte, 0, 256)
	b.ReportAllocs()
	for range b.N {
		var err error
		if line, err = AppendEventLine(line[:0], ev); err != nil {
			b.Fatal(err)
		}
		got, err := ParseEventLine(line)
		if err != nil {
			b.Fatal(err)
		}
		if got.Token != ev.Token || got.Text != ev.Text {
			b.Fatalf("round trip gave %+v", got)
		}
	}
}

// BenchmarkEventLineJSON is the same round trip through encoding/json
// (EncodeLine, json.Unmarshal), what the runner hop did before
// AppendEventLine, and what events with tool calls, logprobs or an error
// still cost.
func BenchmarkEventLineJSON(b *testing.B) {
	ev := backends.Event{Token: 1234, Text: " tokens"}
	var line bytes.Buffer
	b.ReportAllocs()
	for range b.N {
		line.Reset()
		if err := EncodeLine(&line, FromEvent(ev)); err != nil {
			b.Fatal(err)
		}
		var w Event
		if err := json.Unmarshal(line.Bytes(), &w); err != nil {
			b.Fatal(err)
		}
		if got := w.ToEvent(); got.Token != ev.Token || got.Text != ev.Text {
			b.Fatalf("round trip gave %+v", got)
		}
	}
}
