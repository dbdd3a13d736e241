package models

import (
	"strings"
	"testing"
)

func TestPickGGUF(t *testing.T) {
	all := []string{"m-Q2_K.gguf", "m-Q4_0.gguf", "m-Q8_0.gguf", "m.f16.gguf", "sub/m-IQ4_XS.gguf", "mmproj-m-Q4_K_M.gguf", "m-Q6_K-00001-of-00002.gguf", "README.md"}
	for _, tc := range []struct {
		paths   []string
		tag     string
		want    string
		wantErr string
	}{
		{all, "", "m-Q4_0.gguf", ""},
		{all, "q8_0", "m-Q8_0.gguf", ""},
		{all, "F16", "m.f16.gguf", ""},
		{all, "IQ4_XS", "sub/m-IQ4_XS.gguf", ""},
		{all, "Q4_K_M", "", "no Q4_K_M file"},
		{append(all, "m-Q4_K_M.gguf"), "", "m-Q4_K_M.gguf", ""},
		{[]string{"only.gguf"}, "", "only.gguf", ""},
		{[]string{"a-Q2_K.gguf", "b-Q3_K_S.gguf"}, "", "", "no default quantization"},
		{[]string{"a-Q4_0.gguf", "b-Q4_0.gguf"}, "", "", "2 files have quantization Q4_0"},
		{[]string{"README.md"}, "", "", "no single-file .gguf"},
	} {
		got, err := pickGGUF(tc.paths, tc.tag)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("pickGGUF(%v, %q) = %q, %v; want error %q", tc.paths, tc.tag, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("pickGGUF(%v, %q) = %q, %v; want %q", tc.paths, tc.tag, got, err, tc.want)
		}
	}
}

// A manifest recorded by an older import with a block count past the scan's
// bound says so; a good one says nothing.
func TestManifestBroken(t *testing.T) {
	good := &Manifest{ID: "ok", GGUF: &GGUFInfo{Architecture: "llama", BlockCount: 32, ContextLength: 8192, EmbeddingLength: 4096}}
	if why := good.Broken(); why != "" {
		t.Fatalf("good manifest: %q", why)
	}
	if (&Manifest{ID: "onnx", Format: FormatONNX}).Broken() != "" {
		t.Fatal("an ONNX manifest is broken")
	}
	bad := &Manifest{ID: "evil/blocks", GGUF: &GGUFInfo{Architecture: "llama", BlockCount: 1<<32 - 1}}
	why := bad.Broken()
	for _, want := range []string{"llama.block_count is 4294967295", "limit of 512", "modeld rm evil/blocks"} {
		if !strings.Contains(why, want) {
			t.Fatalf("Broken() = %q, does not say %q", why, want)
		}
	}
}
