package placement

import (
	"testing"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/modeld/modeld/internal/testenv"
)

// BenchmarkParseGGUF: the placement's read of a model's metadata (the
// bounded scan, then the parser over a memory map) against the parser
// reading through the file, on a tiny model with Qwen2.5's real 152k-token
// vocabulary (its tokens and merges are what the parser skips).
//
//	go test -run '^$' -bench ParseGGUF -benchtime 5x ./cache/placement/
func BenchmarkParseGGUF(b *testing.B) {
	path := testenv.LlamaChatModel(b, "qwen2", "Qwen-Qwen2.5-7B-Instruct")
	b.Run("through the file", func(b *testing.B) {
		for b.Loop() {
			if _, err := gguf.ParseGGUFFile(path, gguf.SkipLargeMetadata()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parseGGUF", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseGGUF(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
