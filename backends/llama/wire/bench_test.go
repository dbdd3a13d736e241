package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modeld/modeld/backends"
)

// BenchmarkEventLine is the runner hop's encoding cost of one streamed
// token: the runner's EncodeLine of the event and the daemon's decoding of
// the line back into a backends.Event (the socket write and read come on
// top).
func BenchmarkEventLine(b *testing.B) {
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
