package tokenizer

import (
	"strings"
	"testing"
)

// longText builds about n characters of mixed prose, numbers, CJK and emoji.
func longText(n int) string {
	const para = "Local models answer without a network. The daemon loads a model once, " +
		"keeps it warm and tokenizes every request: café, naïve, 東京, 서울, 👍🏽, " +
		"numbers like 3.14159 or 1,000,000, code like x += f(y) // done.\n\n"
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(para)
	}
	r := []rune(sb.String())
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}

// BenchmarkEncode100k tokenizes a 100,000-character text with each fixture.
func BenchmarkEncode100k(b *testing.B) {
	text := longText(100_000)
	for _, name := range goldenNames {
		b.Run(name, func(b *testing.B) {
			tk := loadFixture(b, name)
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				tk.Encode(text)
			}
		})
	}
}

// BenchmarkEncodeShort is the embedding-request case: one sentence.
func BenchmarkEncodeShort(b *testing.B) {
	text := "The quick brown fox jumps over the lazy dog, then naps in the sun."
	for _, name := range []string{"bert-uncased", "llama3", "mistral", "unigram"} {
		b.Run(name, func(b *testing.B) {
			tk := loadFixture(b, name)
			for b.Loop() {
				tk.Encode(text, WithTruncation(0))
			}
		})
	}
}
