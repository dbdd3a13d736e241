package toolcall

import (
	"strings"
	"testing"
)

// BenchmarkStreamLong streams a 16 KiB content answer and a 16 KiB call in
// 4-byte pieces, the size of a token.
func BenchmarkStreamLong(b *testing.B) {
	text := strings.Repeat("Some words of content. ", 700) + "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"" + strings.Repeat("x", 16<<10) + "\"}}\n</tool_call>"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		st, _ := NewStream(Hermes, seqID)
		for i := 0; i < len(text); i += 4 {
			st.Feed(text[i:min(i+4, len(text))])
		}
		st.Close()
	}
}

// BenchmarkStreamContent streams a 16 KiB answer with no call in 4-byte
// pieces: the parser's cost per token of plain text under tools.
func BenchmarkStreamContent(b *testing.B) {
	text := strings.Repeat("Some words of content. ", 700)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		st, _ := NewStream(Hermes, seqID)
		for i := 0; i < len(text); i += 4 {
			st.Feed(text[i:min(i+4, len(text))])
		}
		st.Close()
	}
}
