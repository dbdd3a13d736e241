package ggufgen

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	gguf "github.com/gpustack/gguf-parser-go"
)

func writeTemp(t *testing.T, o Options) (string, *gguf.GGUFFile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.ParseGGUFFile(path)
	if err != nil {
		t.Fatalf("parse generated file: %v", err)
	}
	return path, f
}

func metaString(t *testing.T, f *gguf.GGUFFile, key string) (string, bool) {
	t.Helper()
	v, ok := f.Header.MetadataKV.Get(key)
	if !ok {
		return "", false
	}
	return v.ValueString(), true
}

func TestWriteParsesAsLlama(t *testing.T) {
	for _, kind := range []VocabKind{SPM, BPE} {
		t.Run(kind.String(), func(t *testing.T) {
			o := Tiny(kind)
			_, f := writeTemp(t, o)
			if got := f.Architecture().Architecture; got != "llama" {
				t.Errorf("architecture = %q", got)
			}
			if got, want := len(f.TensorInfos), 3+9*o.Layers; got != want {
				t.Errorf("%d tensors, want %d", got, want)
			}
			if got, _ := metaString(t, f, "tokenizer.chat_template"); got != ChatMLTemplate {
				t.Errorf("chat template = %q", got)
			}
			tok := f.Tokenizer()
			wantModel := map[VocabKind]string{SPM: "llama", BPE: "gpt2"}[kind]
			if tok.Model != wantModel {
				t.Errorf("tokenizer model = %q, want %q", tok.Model, wantModel)
			}
			if kind == BPE && tok.MergesLength == 0 {
				t.Error("BPE vocabulary without merges")
			}
			if tok.TokensLength < 500 || tok.TokensLength > 1000 {
				t.Errorf("vocabulary of %d tokens, want the base vocabulary (500-1000)", tok.TokensLength)
			}
			for _, ti := range f.TensorInfos {
				if strings.HasSuffix(ti.Name, "norm.weight") && ti.Type != gguf.GGMLTypeF32 {
					t.Errorf("%s is %v, norms must be F32", ti.Name, ti.Type)
				}
			}
		})
	}
}

func TestTokenTypes(t *testing.T) {
	v := spmVocab(512)
	for _, text := range []string{IMStart, IMEnd, "<s>", "</s>"} {
		if got := v.types[v.index[text]]; got != tokControl {
			t.Errorf("%s has type %d, want control", text, got)
		}
	}
	for b := 0; b < 256; b++ {
		id, ok := v.index[byteToken(byte(b))]
		if !ok || v.types[id] != tokByte {
			t.Fatalf("byte token %s missing or not of byte type", byteToken(byte(b)))
		}
	}
	if byteToken(0x0a) != "<0x0A>" {
		t.Errorf("byteToken(0x0a) = %s", byteToken(0x0a))
	}
	bv := bpeVocab(512)
	if got := bv.types[bv.index[IMEnd]]; got != tokControl {
		t.Errorf("BPE %s has type %d, want control", IMEnd, got)
	}
}

// Every BPE merge joins two tokens into a third, and every multi-character
// token is made by a merge, so the tokenizer can always reach it.
func TestBPEMergesClosed(t *testing.T) {
	v := bpeVocab(2048)
	made := map[string]bool{}
	for _, m := range v.merges {
		l, r, ok := strings.Cut(m, " ")
		if !ok {
			t.Fatalf("merge %q has no space", m)
		}
		for _, part := range []string{l, r, l + r} {
			if _, ok := v.index[part]; !ok {
				t.Fatalf("merge %q: %q is not a token", m, part)
			}
		}
		made[l+r] = true
	}
	enc := byteEncoder()
	seen := map[string]bool{}
	for _, e := range enc {
		if seen[e] {
			t.Fatalf("byte encoder maps two bytes to %q", e)
		}
		seen[e] = true
	}
	for id, tok := range v.tokens {
		if v.types[id] == tokNormal && len([]rune(tok)) > 1 && !made[tok] {
			t.Errorf("token %q is not produced by any merge", tok)
		}
	}
}

func TestTemplateOptions(t *testing.T) {
	o := Tiny(SPM)
	o.NoTemplate = true
	_, f := writeTemp(t, o)
	if _, ok := metaString(t, f, "tokenizer.chat_template"); ok {
		t.Error("NoTemplate wrote a chat template")
	}
	o = Tiny(BPE)
	o.Template = "{{ messages[0]['content'] }}"
	_, f = writeTemp(t, o)
	if got, _ := metaString(t, f, "tokenizer.chat_template"); got != o.Template {
		t.Errorf("chat template = %q, want %q", got, o.Template)
	}
}

func TestDeterministic(t *testing.T) {
	var a, b, c bytes.Buffer
	o := Tiny(BPE)
	o.Seed = 7
	if err := Write(&a, o); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, o); err != nil {
		t.Fatal(err)
	}
	o.Seed = 8
	if err := Write(&c, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("same options gave different files")
	}
	if bytes.Equal(a.Bytes(), c.Bytes()) || a.Len() != c.Len() {
		t.Error("another seed should change the weights and nothing else")
	}
}

type counter int64

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }

func TestSizes(t *testing.T) {
	var f32, f16 counter
	o := Tiny(SPM)
	if err := Write(&f32, o); err != nil {
		t.Fatal(err)
	}
	o.Type = F16
	if err := Write(&f16, o); err != nil {
		t.Fatal(err)
	}
	if f32 > 1<<20 || f16 >= f32 {
		t.Errorf("tiny F32 %d bytes, F16 %d bytes: want F32 < 1 MiB and F16 smaller", f32, f16)
	}
	var bench counter
	if err := Write(&bench, Bench(SPM)); err != nil {
		t.Fatal(err)
	}
	if bench < 20<<20 || bench > 50<<20 {
		t.Errorf("bench model is %d bytes, want 20-50 MiB", bench)
	}
}

func TestInvalidOptions(t *testing.T) {
	o := Tiny(SPM)
	o.Heads = 3
	o.HeadsKV = 2
	err := Write(io.Discard, o)
	if err == nil {
		t.Fatal("want an error for 64 wide with 3 heads")
	}
	for _, want := range []string{"multiple of Heads", "multiple of HeadsKV"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := ParseVocabKind("wordpiece"); err == nil {
		t.Error("ParseVocabKind accepted wordpiece")
	}
}

func TestFloat16(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff},
		{65520, 0x7c00}, {1e-8, 0}, {5.960464477539063e-08, 0x0001},
		{0.1, 0x2e66}, {0.33325195, 0x3555}, {6.097555e-05, 0x03ff},
	}
	for _, c := range cases {
		if got := float16(c.in); got != c.want {
			t.Errorf("float16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}
