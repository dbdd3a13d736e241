package models

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// projectorGGUF is a well-formed GGUF whose general.architecture is clip,
// the header of llama.cpp's multimodal projector files.
func projectorGGUF() []byte {
	r := new(ggufgen.Raw).Header(1, 3).KVString("general.architecture", "clip").KVString("clip.projector_type", "mlp").KVU32("clip.vision.image_size", 32)
	r.TensorInfo("v.patch_embd.weight", []uint64{8}, 0, 0).Pad(32)
	return r.Raw(make([]byte, 32)).Bytes()
}

// TestImportKeepsProjector: a chat model imported with its projector keeps
// both files; the size counts both; the manifest names the projector; a
// projector alone, a model as a projector and a projector for an ONNX model
// are refused.
func TestImportKeepsProjector(t *testing.T) {
	s := newTestStore(t)
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "mmproj-tiny.gguf")
	writeFile(t, model, tinyGGUF(t))
	writeFile(t, proj, projectorGGUF())
	m, err := s.Import(context.Background(), model, ImportOptions{Name: "test/vision", Projector: proj}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.GGUF.Projector != "mmproj-tiny.gguf" || m.GGUF.File != "tiny.gguf" || len(m.Files) != 2 {
		t.Fatalf("manifest: gguf %+v files %+v", m.GGUF, m.Files)
	}
	want := int64(len(tinyGGUF(t)) + len(projectorGGUF()))
	if m.Size() != want {
		t.Errorf("size %d, want both files' %d", m.Size(), want)
	}
	got, err := s.Get(m.ID)
	if err != nil || got.GGUF.Projector != "mmproj-tiny.gguf" {
		t.Fatalf("read back: %v %+v", err, got)
	}
	if p, err := s.FilePath(got, got.GGUF.Projector); err != nil || p == "" {
		t.Fatalf("projector path: %v", err)
	}
	for name, c := range map[string]struct {
		src  string
		opts ImportOptions
		want string
	}{
		"projector alone":        {proj, ImportOptions{Name: "test/p"}, "is a multimodal projector"},
		"model as projector":     {model, ImportOptions{Name: "test/q", Projector: model}, "both named"},
		"not a projector":        {model, ImportOptions{Name: "test/r", Projector: copyTo(t, model, "other.gguf")}, "not a multimodal projector"},
		"projector for ONNX":     {filepath.Join("..", "testdata", "onnx", "vit-embed"), ImportOptions{Name: "test/s", Projector: proj}, "GGUF chat models"},
		"projector not gguf":     {model, ImportOptions{Name: "test/u", Projector: filepath.Join(dir, "x.bin")}, "not a .gguf"},
		"projector for embedder": {model, ImportOptions{Name: "test/v", Projector: proj, Task: TaskEmbed}, "chat models"},
	} {
		if _, err := s.Import(context.Background(), c.src, c.opts, nil); !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func copyTo(t *testing.T, src, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	writeFile(t, dst, tinyGGUF(t))
	return dst
}
