package ggufgen

import (
	"bytes"
	"strings"
	"testing"
)

// TestProjectorIsDeterministic: the same options give the same bytes, a
// seed changes them, and the file says it is a clip projector of the
// mlp type (what llama.cpp's multimodal library and modeld import read).
func TestProjectorIsDeterministic(t *testing.T) {
	write := func(o ProjectorOptions) []byte {
		var b bytes.Buffer
		if err := WriteProjector(&b, o); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := write(TinyProjector()), write(TinyProjector())
	if !bytes.Equal(a, b) {
		t.Fatal("the same options gave different files")
	}
	seeded := TinyProjector()
	seeded.Seed = 7
	if bytes.Equal(a, write(seeded)) {
		t.Fatal("another seed gave the same file")
	}
	for _, s := range []string{"GGUF", "clip.projector_type", "mlp", "mm.2.weight", "v.patch_embd.weight"} {
		if !bytes.Contains(a, []byte(s)) {
			t.Errorf("the projector file lacks %q", s)
		}
	}
	if n := TinyProjector().ImageTokens(); n != 16 {
		t.Errorf("ImageTokens = %d, want (32/8)² = 16", n)
	}
}

// TestProjectorRefusesShapesTheLibraryMisreads: options llama.cpp would
// load wrongly or not at all are errors, each named.
func TestProjectorRefusesShapesTheLibraryMisreads(t *testing.T) {
	for name, o := range map[string]ProjectorOptions{
		"FF":         {Embd: 32, FF: 32},
		"multiple":   {ImageSize: 30, PatchSize: 8},
		"heads":      {Embd: 30, Heads: 4},
		"two layers": {Layers: 1},
	} {
		err := WriteProjector(&bytes.Buffer{}, o)
		if err == nil || !strings.Contains(err.Error(), "projector") {
			t.Errorf("%s: %v, want a projector error", name, err)
		}
	}
}
