package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// tinyJSON is a minimal WordPiece tokenizer.json; replace swaps one
// component for the given JSON.
func tinyJSON(t *testing.T, replace map[string]any) []byte {
	t.Helper()
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "[UNK]", "special": true, "normalized": false},
			map[string]any{"id": 1, "content": "[CLS]", "special": true, "normalized": false},
			map[string]any{"id": 2, "content": "[SEP]", "special": true, "normalized": false},
		},
		"normalizer":    map[string]any{"type": "Lowercase"},
		"pre_tokenizer": map[string]any{"type": "WhitespaceSplit"},
		"post_processor": map[string]any{
			"type": "BertProcessing", "cls": []any{"[CLS]", 1}, "sep": []any{"[SEP]", 2},
		},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{
			"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"vocab": map[string]int{"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "##s": 5},
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

func TestTinyTokenizer(t *testing.T) {
	tk, err := New(tinyJSON(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := tk.Encode("Hello worlds xyz")
	if want := []int64{1, 3, 4, 5, 0, 2}; !slices.Equal(enc.IDs, want) {
		t.Fatalf("ids %v, want %v", enc.IDs, want)
	}
	if got := tk.Decode(enc.IDs, false); got != "[CLS] hello worlds [UNK] [SEP]" {
		t.Fatalf("decode %q", got)
	}
	if got := tk.Decode(enc.IDs, true); got != "hello worlds" {
		t.Fatalf("decode skipping special tokens %q", got)
	}
	if tk.MaxLength() != 0 {
		t.Fatalf("MaxLength without config = %d, want 0", tk.MaxLength())
	}
}

func TestUnknownComponentIsAnError(t *testing.T) {
	bogus := map[string]any{"type": "Bogus"}
	for _, tc := range []struct {
		field string
		value any
		want  string
	}{
		{"normalizer", bogus, `unknown normalizer type "Bogus"`},
		{"normalizer", map[string]any{"type": "Sequence", "normalizers": []any{bogus}}, `unknown normalizer type "Bogus"`},
		{"pre_tokenizer", bogus, `unknown pre_tokenizer type "Bogus"`},
		{"pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": []any{bogus}}, `unknown pre_tokenizer type "Bogus"`},
		{"post_processor", bogus, `unknown post_processor type "Bogus"`},
		{"decoder", bogus, `unknown decoder type "Bogus"`},
		{"model", map[string]any{"type": "Bogus", "vocab": map[string]int{"a": 0}}, `unknown model type "Bogus"`},
		{"pre_tokenizer", map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `[[:alpha:]]`}, "behavior": "Isolated"}, "POSIX"},
		{"pre_tokenizer", map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\p{Klingon}`}, "behavior": "Isolated"}, "Klingon"},
		{"pre_tokenizer", map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "a"}, "behavior": "Sideways"}, "Sideways"},
		{"pre_tokenizer", map[string]any{"type": "Metaspace", "prepend_scheme": "sometimes"}, "sometimes"},
	} {
		_, err := New(tinyJSON(t, map[string]any{tc.field: tc.value}), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: err = %v, want it to mention %s", tc.field, tc.value, err, tc.want)
		}
	}
	if _, err := New([]byte("{not json"), nil); err == nil {
		t.Error("corrupt tokenizer.json: no error")
	}
	if _, err := New(tinyJSON(t, nil), []byte(`{"padding_side": "middle"}`)); err == nil {
		t.Error("bad padding_side: no error")
	}
}

func TestLoadMissingDir(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestFromFileReadsGzip(t *testing.T) {
	tk, err := FromFile(filepath.Join("testdata", "llama3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	ref := loadFixture(t, "llama3")
	text := "Hello, world! 👋"
	if got, want := tk.Encode(text).IDs, ref.Encode(text).IDs; !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	if _, ok := tk.BOSID(); ok {
		t.Fatal("BOSID without tokenizer_config.json should be absent")
	}
}

func TestRegexTranslation(t *testing.T) {
	for _, tc := range []struct {
		pattern, text string
		want          []string
	}{
		{`\s+(?!\S)|\s+`, "a   b  ", []string{"  ", " ", "  "}},
		{`(?i:'s|'ll)`, "it'S we'LL 's", []string{"'S", "'LL", "'s"}},
		{`\p{N}{1,3}`, "1234567", []string{"123", "456", "7"}},
		{`[^\r\n\p{L}\p{N}]?\p{L}+`, " hello,world", []string{" hello", ",world"}},
		{`\d+`, "12٣4x", []string{"12٣4"}},
		{`.+`, "ab\ncd", []string{"ab", "cd"}},
		{`^\w+`, "one two\nthree", []string{"one", "three"}},
		{`\w+$`, "one two\nthree", []string{"two", "three"}},
		{`\x{41}+`, "AAB", []string{"AA"}},
		{`[\W\d]+`, "ab, 12cd", []string{", 12"}},
		{`(?:ab){1}+`, "ababab", []string{"ababab"}},
		{`a++b`, "aaab", []string{"aaab"}},
		{`(?>a|ab)c`, "abc", []string{"abc"}},
		{`[a-c-]+`, "a-b-cd", []string{"a-b-c"}},
		{`(?i:[a-c])+`, "AbCd", []string{"AbC"}},
		{`\bis\b`, "this is", []string{"is"}},
		{`[^\s\p{L}\p{N}]+`, "a+=b", []string{"+="}},
		{` ?\p{Han}+`, "x 漢字", []string{" 漢字"}},
		{`\s`, "a\u0085b\ufeffc", []string{"\u0085"}},
	} {
		raw, _ := json.Marshal(map[string]string{"Regex": tc.pattern})
		p, err := newPattern(raw, false)
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		if got := p.matchOnly(nil, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s on %q: %q, want %q", tc.pattern, tc.text, got, tc.want)
		}
	}
}

func TestSplitModes(t *testing.T) {
	lit, _ := json.Marshal(map[string]string{"String": "-"})
	captured, err := newPattern(lit, true)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := newPattern(lit, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := captured.split(nil, "a-b--c"), []string{"a", "-", "b", "-", "-", "c"}; !slices.Equal(got, want) {
		t.Errorf("captured split %q, want %q", got, want)
	}
	if got, want := plain.split(nil, "a-b--c"), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("plain split %q, want %q", got, want)
	}
	if got, want := plain.isolate(nil, "-a-b-"), []string{"-", "a", "-", "b", "-"}; !slices.Equal(got, want) {
		t.Errorf("isolate %q, want %q", got, want)
	}
}

// Byte-level and byte-fallback tokenizers are lossless: decoding the ids of
// a text gives the text back (qwen3 after NFC, mistral exactly).
func TestDecodeRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral", "bpe-roberta"} {
		tk := loadFixture(t, name)
		g := readGolden(t, name)
		n := 0
		for _, c := range g.Cases {
			text := c.Text
			if name == "qwen3" {
				text = norm.NFC.String(text)
			}
			if name == "bpe-roberta" {
				if strings.ContainsAny(text, "<>") {
					continue // typed special tokens
				}
				if text != "" && !strings.HasPrefix(text, " ") {
					text = " " + text // add_prefix_space
				}
			}
			if name == "mistral" && strings.Contains(text, "<") {
				continue // typed special tokens
			}
			got := tk.Decode(tk.Encode(c.Text, WithoutSpecialTokens()).IDs, false)
			if got != text {
				t.Errorf("%s: round trip of %q gave %q", name, text, got)
			}
			n++
		}
		if n < 200 {
			t.Errorf("%s: only %d strings round-tripped", name, n)
		}
	}
}

func TestTruncationKeepsPrefixAndReports(t *testing.T) {
	tk := loadFixture(t, "bert-uncased")
	cls, _ := tk.CLSID()
	sep, _ := tk.SEPID()
	long := longText(100_000)

	enc := tk.Encode(long, WithTruncation(0))
	if len(enc.IDs) != 512 || enc.IDs[0] != cls || enc.Truncated == 0 {
		t.Fatalf("len %d first %d truncated %d; want 512 tokens from [CLS]", len(enc.IDs), enc.IDs[0], enc.Truncated)
	}
	if enc.IDs[511] == sep {
		t.Fatal("transformers.js truncates after adding [SEP], so the last token is not [SEP]")
	}
	full := tk.Encode(long)
	if len(full.IDs)-enc.Truncated != 512 || !slices.Equal(full.IDs[:512], enc.IDs) {
		t.Fatalf("truncation must keep the first 512 ids of %d", len(full.IDs))
	}
	if e := tk.Encode(long, WithTruncation(4096)); len(e.IDs) != 512 {
		t.Fatalf("a limit above model_max_length gave %d ids, want 512", len(e.IDs))
	}
	if e := tk.Encode("short text", WithTruncation(8)); e.Truncated != 0 || e.IDs[len(e.IDs)-1] != sep {
		t.Fatalf("short text changed by truncation: %+v", e)
	}
}

func TestPadding(t *testing.T) {
	for _, tc := range []struct {
		name string
		left bool
	}{{"bert-uncased", false}, {"mistral", true}} {
		tk := loadFixture(t, tc.name)
		pad, ok := tk.PadID()
		if !ok {
			t.Fatalf("%s: no pad id", tc.name)
		}
		texts := []string{"a", "a much longer text than the first one", "mid size"}
		encs := tk.EncodeBatch(texts, WithPadding(PadLongest))
		longest := len(tk.Encode(texts[1]).IDs)
		for i, e := range encs {
			if len(e.IDs) != longest || len(e.AttentionMask) != longest || len(e.TypeIDs) != longest || len(e.Tokens) != longest {
				t.Fatalf("%s: encoding %d has lengths %d/%d/%d/%d, want %d", tc.name, i, len(e.IDs), len(e.AttentionMask), len(e.TypeIDs), len(e.Tokens), longest)
			}
			plain := tk.Encode(texts[i]).IDs
			padN := longest - len(plain)
			at := func(j int) int { // index of the j-th pad position
				if tc.left {
					return j
				}
				return len(plain) + j
			}
			for j := 0; j < padN; j++ {
				if e.IDs[at(j)] != pad || e.AttentionMask[at(j)] != 0 {
					t.Fatalf("%s: encoding %d position %d not padding: %v %v", tc.name, i, at(j), e.IDs, e.AttentionMask)
				}
			}
			real := e.IDs[padN:]
			if !tc.left {
				real = e.IDs[:len(plain)]
			}
			if !slices.Equal(real, plain) {
				t.Fatalf("%s: encoding %d ids %v, want %v around the padding", tc.name, i, e.IDs, plain)
			}
		}
		fixed := tk.EncodeBatch(texts, WithTruncation(5), WithPadding(PadMaxLength))
		for _, e := range fixed {
			if len(e.IDs) != 5 {
				t.Fatalf("%s: PadMaxLength gave %d ids, want 5", tc.name, len(e.IDs))
			}
		}
	}
}

func TestPairForCrossEncoder(t *testing.T) {
	tk := loadFixture(t, "bert-uncased")
	a := tk.Encode("how old are you?", WithoutSpecialTokens()).IDs
	b := tk.Encode("i am six.", WithoutSpecialTokens()).IDs
	enc := tk.EncodePair("How old are you?", "I am six.")
	want := slices.Concat([]int64{101}, a, []int64{102}, b, []int64{102})
	if !slices.Equal(enc.IDs, want) {
		t.Fatalf("pair ids %v, want %v", enc.IDs, want)
	}
	for i, ty := range enc.TypeIDs {
		if wantTy := int64(0); i > len(a)+1 {
			wantTy = 1
			if ty != wantTy {
				t.Fatalf("type ids %v: position %d should be 1", enc.TypeIDs, i)
			}
		} else if ty != wantTy {
			t.Fatalf("type ids %v: position %d should be 0", enc.TypeIDs, i)
		}
	}
	batch := tk.EncodePairBatch([][2]string{{"q", "doc one"}, {"q", "a longer document two"}}, WithPadding(PadLongest))
	if len(batch[0].IDs) != len(batch[1].IDs) {
		t.Fatal("pair batch not padded to one length")
	}
}

func TestByteLevelPairKeepsBothTexts(t *testing.T) {
	tk := loadFixture(t, "llama3")
	a, b := "Is it raining?", " The sky is clear."
	want := slices.Concat(tk.Encode(a).IDs, tk.Encode(b).IDs)
	if got := tk.EncodePair(a, b).IDs; !slices.Equal(got, want) {
		t.Fatalf("pair ids %v, want %v", got, want)
	}
}

func TestSpecialTokenIDs(t *testing.T) {
	bert := loadFixture(t, "bert-uncased")
	for name, tc := range map[string]struct {
		f    func() (int64, bool)
		want int64
	}{
		"CLS": {bert.CLSID, 101}, "SEP": {bert.SEPID, 102}, "PAD": {bert.PadID, 0},
		"UNK": {bert.UNKID, 100}, "MASK": {bert.MaskID, 103},
	} {
		if id, ok := tc.f(); !ok || id != tc.want {
			t.Errorf("bert %s = %d, %v; want %d", name, id, ok, tc.want)
		}
	}
	if _, ok := bert.BOSID(); ok {
		t.Error("bert has no bos_token")
	}
	llama := loadFixture(t, "llama3")
	bos, _ := llama.BOSID()
	eos, _ := llama.EOSID()
	pad, _ := llama.PadID()
	if bos != 128000 || eos != 128001 || pad != eos {
		t.Errorf("llama3 bos %d eos %d pad %d; want 128000, 128001 and pad = eos", bos, eos, pad)
	}
	if id, ok := llama.ID("<|eot_id|>"); !ok || id != 128009 {
		t.Errorf("ID(<|eot_id|>) = %d, %v", id, ok)
	}
	if tok, ok := llama.Token(128009); !ok || tok != "<|eot_id|>" {
		t.Errorf("Token(128009) = %q, %v", tok, ok)
	}
	if llama.VocabSize() != 128256 {
		t.Errorf("VocabSize = %d", llama.VocabSize())
	}
	typed := llama.Encode("<|start_header_id|>user<|end_header_id|>").IDs
	if len(typed) != 3 || typed[0] != 128006 || typed[2] != 128007 {
		t.Errorf("typed special tokens not matched as single tokens: %v", typed)
	}
}

func TestInvalidUTF8IsReplaced(t *testing.T) {
	tk := loadFixture(t, "llama3")
	if got, want := tk.Encode("a\xffb").IDs, tk.Encode("a\uFFFDb").IDs; !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	if got := tk.Decode(nil, false); got != "" {
		t.Fatalf("Decode(nil) = %q", got)
	}
}

func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"llama3", "unigram", "bert-uncased"} {
		tk := loadFixture(t, name)
		g := readGolden(t, name)
		var wg sync.WaitGroup
		errs := make(chan string, len(g.Cases))
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, c := range g.Cases {
					if got := tk.Encode(c.Text).IDs; !slices.Equal(got, c.IDs) {
						errs <- c.Text
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for text := range errs {
			t.Errorf("%s: concurrent encode of %q differs", name, text)
		}
	}
}

func TestGoldenFilesAreSmall(t *testing.T) {
	for _, name := range goldenNames {
		entries, err := os.ReadDir(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() > 10<<20 {
				t.Errorf("%s/%s is %d bytes; gzip it", name, e.Name(), info.Size())
			}
		}
	}
}
