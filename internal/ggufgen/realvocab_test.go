package ggufgen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// TestReadVocabReadsEveryAssetVocabulary reads each vocabulary-only GGUF of the
// llama.cpp test assets and checks that tokens, types and special ids agree.
func TestReadVocabReadsEveryAssetVocabulary(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.LlamaAssets(t), "vocab", "ggml-vocab-*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vocabularies in the assets (%v)", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "ggml-vocab-"), ".gguf")
		v, err := ggufgen.ReadVocab(f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if v.Types != nil && len(v.Types) != len(v.Tokens) {
			t.Errorf("%s: %d types for %d tokens", name, len(v.Types), len(v.Tokens))
		}
		for _, s := range []string{"bos", "eos"} {
			if id := v.SpecialID(s); id >= len(v.Tokens) {
				t.Errorf("%s: %s id %d out of range", name, s, id)
			}
		}
		t.Logf("%-16s model=%-5s pre=%-14s tokens=%6d bos=%d eos=%d eot=%d dropped=%v", name, v.Model, v.Pre, len(v.Tokens), v.SpecialID("bos"), v.SpecialID("eos"), v.SpecialID("eot"), v.Dropped)
	}
}

// TestWriteVocabModelRoundTrips writes a model from a real vocabulary and reads
// its tokenizer back unchanged, with the template set.
func TestWriteVocabModelRoundTrips(t *testing.T) {
	v, err := ggufgen.ReadVocab(testenv.LlamaVocab(t, "phi-3"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(testenv.LlamaTemplate(t, "microsoft-Phi-3.5-mini-instruct"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := ggufgen.WriteVocabModelFile(path, v, ggufgen.Options{Type: ggufgen.F16, Template: string(tmpl)}); err != nil {
		t.Fatal(err)
	}
	back, err := ggufgen.ReadVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Model != v.Model || back.Pre != v.Pre || len(back.Tokens) != len(v.Tokens) || len(back.Types) != len(v.Types) {
		t.Fatalf("round trip: model %q/%q pre %q/%q tokens %d/%d types %d/%d", back.Model, v.Model, back.Pre, v.Pre, len(back.Tokens), len(v.Tokens), len(back.Types), len(v.Types))
	}
	for _, s := range []string{"bos", "eos", "unknown", "padding"} {
		if back.SpecialID(s) != v.SpecialID(s) {
			t.Errorf("%s id %d, want %d", s, back.SpecialID(s), v.SpecialID(s))
		}
	}
	for i := range v.Tokens {
		if back.Tokens[i] != v.Tokens[i] || back.Types[i] != v.Types[i] {
			t.Fatalf("token %d: %q/%d, want %q/%d", i, back.Tokens[i], back.Types[i], v.Tokens[i], v.Types[i])
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, tmpl) {
		t.Fatal("chat template not in the file")
	}
}
