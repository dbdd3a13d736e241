package engine

import (
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// TestWholeCharactersGreedyIsText: a model written from a real byte-level
// vocabulary with ggufgen's WholeCharacters decodes, greedily, only tokens
// whose bytes are whole UTF-8 characters, so the output is valid text
// token by token (what a server that parses its output as text needs of
// the benchmark model); the streamed text is those pieces.
func TestWholeCharactersGreedyIsText(t *testing.T) {
	initLib(t)
	for _, name := range []string{"qwen2", "llama-bpe"} {
		t.Run(name, func(t *testing.T) {
			v, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := ggufgen.WriteVocabModelFile(path, v, ggufgen.Options{Type: ggufgen.F16, WholeCharacters: true}); err != nil {
				t.Fatal(err)
			}
			m, err := open(path, Options{ContextSize: 512, Slots: 1}, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, prompt := range []string{"Hello world, tell me a story about the water.", "日本語のテキスト; Привет, мир! 🙂 naïve café"} {
				r := generate(t, m, Request{Prompt: tokenize(t, m, prompt), MaxTokens: 200})
				if len(r.tokens) != 200 {
					t.Fatalf("%d tokens, want 200 (finish %q)", len(r.tokens), r.final.Finish)
				}
				var all []byte
				for i, id := range r.tokens {
					piece, err := m.TokenPiece(id, true)
					if err != nil {
						t.Fatal(err)
					}
					if !utf8.ValidString(piece) {
						t.Fatalf("token %d (id %d) is %q: not whole characters", i, id, piece)
					}
					all = append(all, piece...)
				}
				if string(all) != r.text {
					t.Errorf("streamed text %q, pieces %q", r.text, all)
				}
			}
		})
	}
}
