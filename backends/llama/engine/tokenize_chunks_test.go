package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// longText is a text of at least n bytes with what tokenizers split on:
// lines that start with letters, digits, spaces, code, and other scripts.
func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Line %d: The quick brown fox's 12345 jumps over the lazy dog.\n", i)
		fmt.Fprintf(&b, "  func f%d(x int) { return x*%d } // code\n", i, i)
		b.WriteString("Ünïcödé naïve café; 日本語のテキスト; Привет, мир! 🙂\n\n")
		b.WriteString("tabs\tand   spaces  \n<|im_start|>user\n")
	}
	return b.String()
}

// realVocabs are vocabularies of the llama.cpp test assets, one for each
// kind of pre-tokenizer (Llama 3's, Qwen's, GPT-2's, DeepSeek Coder's,
// StarCoder's, Falcon's, Refact's, Gemma's) and the SentencePiece ones.
// The BERT vocabularies are encoders' that the llama architecture does not
// tokenize with; the others share one of these pre-tokenizers.
var realVocabs = []string{"llama-bpe", "qwen35", "gpt-2", "deepseek-coder", "starcoder", "falcon", "refact", "gemma-4",
	"phi-3", "llama-spm", "baichuan"}

// TestTokenizeChunkedSameIDs: a long text tokenized in pieces (so that it
// can stop) gives exactly the ids of the whole text in one call, with and
// without specials, for every real vocabulary.
func TestTokenizeChunkedSameIDs(t *testing.T) {
	initLib(t)
	// Pieces of 16 KiB (TokenizeContext's are 256 KiB, from chunkedMin on:
	// the same code, with more text than a test needs).
	const size = 16 << 10
	text := longText(5*size + size/2)
	for _, name := range realVocabs {
		t.Run(name, func(t *testing.T) {
			v, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, name))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := ggufgen.WriteVocabModelFile(path, v, ggufgen.Options{Type: ggufgen.F16}); err != nil {
				t.Fatal(err)
			}
			m, err := open(path, Options{ContextSize: 256, Slots: 1}, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pieces := 0
			for rest := text; rest != ""; pieces++ {
				cut, err := m.nextCut(rest, size, true)
				if err != nil {
					t.Fatal(err)
				}
				rest = rest[cut:]
			}
			if pieces == 1 {
				// A vocabulary that adds a space prefix to each call
				// (SentencePiece's) fails every cut's check: its texts go
				// whole, the same call as Tokenize.
				t.Logf("%s: no cut keeps the ids; tokenized whole", name)
				return
			}
			t.Logf("%s: %d pieces", name, pieces)
			for _, special := range []bool{false, true} {
				whole, err := m.Tokenize(text, special, special)
				if err != nil {
					t.Fatal(err)
				}
				chunked, err := m.tokenizePieces(context.Background(), text, special, special, size)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(whole, chunked) {
					i := 0
					for i < min(len(whole), len(chunked)) && whole[i] == chunked[i] {
						i++
					}
					t.Fatalf("special %v: %d ids in pieces, %d whole; first difference at %d", special, len(chunked), len(whole), i)
				}
			}
		})
	}
}

// TestTokenizeStopsWhenContextEnds: a long text's tokenization ends with
// the context's error between pieces, and the model tokenizes the next
// text as before.
func TestTokenizeStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pieces := 0
	m := openWithHooks(t, ggufgen.Tiny(ggufgen.BPE), Options{}, Hooks{TokenizedPiece: func(int) {
		if pieces++; pieces == 2 {
			cancel()
		}
	}})
	text := longText(4 * chunkedMin)
	_, err := m.TokenizeContext(ctx, text, true, false)
	if !errors.Is(err, context.Canceled) || pieces != 2 {
		t.Fatalf("err %v after %d pieces, want context.Canceled after the second of %d", err, pieces, len(text)/chunkSize)
	}
	if ids, err := m.TokenizeContext(context.Background(), "hello world", true, false); err != nil || len(ids) == 0 {
		t.Fatalf("next text: %v, %v", ids, err)
	}
}
