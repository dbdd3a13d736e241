package tokenizer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostileJSON is a minimal WordPiece tokenizer.json with components replaced.
func hostileJSON(t testing.TB, replace map[string]any) []byte {
	t.Helper()
	doc := map[string]any{
		"added_tokens":  []any{map[string]any{"id": 0, "content": "[UNK]", "special": true, "normalized": false}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "WhitespaceSplit"},
		"model": map[string]any{
			"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"vocab": map[string]int{"[UNK]": 0, "a": 1, "b": 2, "##a": 3, "##b": 4},
		},
	}
	for k, v := range replace {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func splitRegex(pattern string) map[string]any {
	return map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false}
}

// A catastrophic pattern, (a+)+$ on 41 a's and a b, ends with a
// *RegexTimeoutError naming the pattern, not the text, instead of running
// for ever; the tokenizer keeps working for other texts.
func TestCatastrophicRegexTimesOut(t *testing.T) {
	text := strings.Repeat("a", 41) + "b"
	for name, replace := range map[string]map[string]any{
		"Split pre-tokenizer":   {"pre_tokenizer": splitRegex("(a+)+$")},
		"Replace normalizer":    {"normalizer": map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "(a+)+$"}, "content": "x"}},
		"Replace pre-tokenizer": {"pre_tokenizer": map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "(a+)+$"}, "content": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			tk, err := New(hostileJSON(t, replace), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tk.EncodeContext(context.Background(), text)
			var te *RegexTimeoutError
			if !errors.Is(err, ErrRegexTimeout) || !errors.As(err, &te) {
				t.Fatalf("EncodeContext = %v, want a RegexTimeoutError", err)
			}
			if !strings.Contains(err.Error(), "(a+)+$") || strings.Contains(err.Error(), text) || te.Runes != 42 || te.HTTPStatus() != 500 {
				t.Fatalf("error %q (runes %d) should name the pattern and the length, not the text", err, te.Runes)
			}
			if enc, err := tk.EncodeContext(context.Background(), "ab ba"); err != nil || len(enc.IDs) == 0 {
				t.Fatalf("a harmless text afterwards: %v, %v", enc, err)
			}
			// The old entry point panics with the same error rather than hang.
			if name != "Split pre-tokenizer" {
				return
			}
			func() {
				defer func() {
					if e, ok := recover().(error); !ok || !errors.Is(e, ErrRegexTimeout) {
						t.Fatalf("Encode panicked with %v, want the timeout", e)
					}
				}()
				tk.Encode(text)
			}()
		})
	}
}

// Encoding stops when the context ends: between texts, pieces and matches.
func TestEncodeStopsWhenContextEnds(t *testing.T) {
	tk, err := New(hostileJSON(t, map[string]any{"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "WhitespaceSplit"}, splitRegex("(a+)+$"),
	}}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each word backtracks some 2^10 steps in a single match: a fraction of
	// a millisecond, some milliseconds under the race detector on a loaded
	// machine, far under the match timeout; all 20000 take seconds.
	word := strings.Repeat("a", 10) + "b"
	text := strings.TrimSpace(strings.Repeat(word+" ", 20000))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = tk.EncodeContext(ctx, text)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EncodeContext = %v, want the deadline", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := tk.EncodeBatchContext(ctx, []string{"a", "b"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled batch = %v", err)
	}
	if _, err := tk.EncodePairBatchContext(ctx, [][2]string{{"a", "b"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pair batch = %v", err)
	}
}

// Hostile tokenizer files are refused at load with an error saying why.
func TestLoadRefusesHostileTokenizers(t *testing.T) {
	deep := strings.Repeat("(", 40) + "a" + strings.Repeat(")", 40)
	many := make([]any, MaxAddedTokens+1)
	for i := range many {
		many[i] = map[string]any{"id": i, "content": fmt.Sprint("t", i)}
	}
	cases := map[string]struct {
		json []byte
		want string
	}{
		"regex too long":        {hostileJSON(t, map[string]any{"pre_tokenizer": splitRegex(strings.Repeat("a", MaxPatternRunes+1))}), "4097 characters (limit 4096)"},
		"regex nested 40 deep":  {hostileJSON(t, map[string]any{"pre_tokenizer": splitRegex(deep)}), "nested more than 32 deep"},
		"string pattern long":   {hostileJSON(t, map[string]any{"normalizer": map[string]any{"type": "Replace", "pattern": map[string]any{"String": strings.Repeat("a", MaxPatternRunes+1)}, "content": ""}}), "limit 4096"},
		"added tokens too many": {hostileJSON(t, map[string]any{"added_tokens": many}), "262145 tokens, more than 262144"},
		"added token too long":  {hostileJSON(t, map[string]any{"added_tokens": []any{map[string]any{"id": 9, "content": strings.Repeat("x", 2000)}}}), "2000 bytes, more than 1024"},
		"wordpiece max chars": {hostileJSON(t, map[string]any{"model": map[string]any{
			"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 1 << 30, "vocab": map[string]int{"[UNK]": 0},
		}}), "max_input_chars_per_word 1073741824"},
		"JSON nested 10^6 deep": {[]byte(`{"model":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`), "exceeded max depth"},
		"too large":             {make([]byte, MaxTokenizerBytes+1), "more than"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(c.json, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error saying %q", err, c.want)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		})
	}
	if _, err := New(hostileJSON(t, nil), make([]byte, MaxConfigBytes+1)); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json is") {
		t.Fatalf("huge config: %v", err)
	}
}

// Files on disk are size-checked before they are read, and a gzip bomb stops
// at the limit while unpacking.
func TestLoadRefusesHugeFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, tokenizerFile)
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxTokenizerBytes + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "more than the 134217728 a tokenizer file may have") {
		t.Fatalf("Load of a huge tokenizer.json = %v", err)
	}

	bomb := filepath.Join(t.TempDir(), "bomb.json.gz")
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range MaxTokenizerBytes>>20 + 1 {
		if _, err := zw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bomb, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(bomb); err == nil || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Fatalf("FromFile of a %d-byte gzip bomb = %v", buf.Len(), err)
	}
}

func FuzzNew(f *testing.F) {
	f.Add(hostileJSON(f, nil), []byte(nil), "ab a")
	f.Add(hostileJSON(f, map[string]any{"pre_tokenizer": splitRegex(`\s+(?!\S)|\p{L}+`)}), []byte(`{"model_max_length": 8}`), "a  b")
	f.Add(hostileJSON(f, map[string]any{"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "NFKC"}, map[string]any{"type": "Lowercase"}, map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
	}}}), []byte(`{"padding_side": "left"}`), "A B")
	f.Add(hostileJSON(f, map[string]any{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1, "ab": 2}, "merges": []string{"a b"}}}), []byte(nil), "abab")
	f.Add(hostileJSON(f, map[string]any{"model": map[string]any{"type": "Unigram", "unk_id": 0, "vocab": []any{[]any{"<unk>", 0}, []any{"a", -1}, []any{"ab", -1.5}}}}), []byte(nil), "abab")
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{}}}`), []byte(`{}`), "")
	f.Fuzz(func(t *testing.T, tj, cj []byte, text string) {
		tk, err := New(tj, cj)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		enc, err := tk.EncodeContext(ctx, text, WithTruncation(64))
		if err != nil {
			if !errors.Is(err, ErrRegexTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("EncodeContext: %v", err)
			}
			return
		}
		if len(enc.IDs) != len(enc.AttentionMask) || len(enc.IDs) != len(enc.TypeIDs) {
			t.Fatalf("ragged encoding %+v", enc)
		}
		_ = tk.Decode(enc.IDs, true)
	})
}

func FuzzTranslateRegex(f *testing.F) {
	for _, p := range []string{
		`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		`[\p{Han}\p{Hiragana}]+|\d{1,3}(?=(?:\d{3})*\b)`, `(a+)+$`, `[[:alpha:]]`, `\u00e9|\x{1F600}`, `a{2,}+b*?`, `(?>x+)y`, `[^]`, `\`,
	} {
		f.Add(p, "Hello world's 123 ÉÀ 你好 \n\t!")
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		raw, err := json.Marshal(map[string]string{"Regex": pattern})
		if err != nil {
			return
		}
		p, err := newPattern(raw, false)
		if err != nil {
			return
		}
		if len(text) > 256 {
			text = text[:256]
		}
		ru := &run{ctx: context.Background()}
		var stopped error
		func() {
			defer catch(&stopped)
			pieces := p.isolate(ru, text)
			if strings.Join(pieces, "") != strings.ToValidUTF8(text, "\uFFFD") && strings.Join(pieces, "") != string([]rune(text)) {
				t.Fatalf("isolate(%q) = %q loses text", text, pieces)
			}
		}()
		if stopped != nil && !errors.Is(stopped, ErrRegexTimeout) {
			t.Fatalf("stopped with %v", stopped)
		}
	})
}

// FuzzEncodeReal encodes arbitrary text with the real tokenizers of the
// goldens: never an error, every id in the vocabulary, the same ids twice.
func FuzzEncodeReal(f *testing.F) {
	for _, s := range []string{"Hello, world!", "  leading and   inner spaces\n\n", "你好，世界 こんにちは", "<|im_start|>user\nhi<|im_end|>", "x\xff\xfey", "ﬁ Ⅻ ½ é", "[CLS] [SEP] [MASK]", "123456789 3.14"} {
		f.Add(s, uint8(0))
	}
	toks := make([]*Tokenizer, len(goldenNames))
	for i, name := range goldenNames {
		toks[i] = loadFixture(f, name)
	}
	f.Fuzz(func(t *testing.T, text string, which uint8) {
		tk := toks[int(which)%len(toks)]
		if len(text) > 4096 {
			text = text[:4096]
		}
		a, err := tk.EncodePairContext(context.Background(), text, text, WithTruncation(0))
		if err != nil {
			t.Fatalf("encode %q: %v", text, err)
		}
		b, err := tk.EncodePairContext(context.Background(), text, text, WithTruncation(0))
		if err != nil || !slices.Equal(a.IDs, b.IDs) {
			t.Fatalf("encode %q twice: %v / %v (%v)", text, a.IDs, b.IDs, err)
		}
		n := int64(tk.VocabSize())
		for _, id := range a.IDs {
			if id < 0 || id >= n {
				t.Fatalf("id %d outside the vocabulary of %d for %q", id, n, text)
			}
		}
	})
}
