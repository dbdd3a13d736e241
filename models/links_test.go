package models

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// canary writes a file outside every folder the tests import, whose bytes
// must never reach the store.
func canary(t *testing.T) (path string, data []byte) {
	t.Helper()
	data = []byte("CANARY private bytes that are not part of any model " + t.Name())
	path = filepath.Join(t.TempDir(), "id_ed25519")
	writeFile(t, path, data)
	return path, data
}

// storeHolds reports whether any file of the store contains b.
func storeHolds(t *testing.T, s *Store, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, b) {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// An ONNX folder that names a file outside itself through a symlink or a
// hard link (the external-data file model.onnx_data, a tokenizer, a config)
// is refused with a clear error, and nothing of the outside file, nor
// anything else, reaches the store. Before, the link was followed and the
// canary's bytes came back as the embedding.
func TestImportFolderRefusesLinksOutside(t *testing.T) {
	for _, tc := range []struct {
		name, file, why string
		link            func(target, at string) error
	}{
		{"symlink external data", "onnx/model.onnx_data", "is a symlink to", os.Symlink},
		{"symlink tokenizer", "tokenizer.json", "is a symlink to", os.Symlink},
		{"symlink to a symlink outside", "onnx/model.onnx_data", "is a symlink to", func(target, at string) error {
			hop := filepath.Join(filepath.Dir(target), "hop")
			if err := os.Symlink(target, hop); err != nil {
				return err
			}
			return os.Symlink(hop, at)
		}},
		{"relative symlink up", "onnx/model.onnx_data", "is a symlink to", func(target, at string) error {
			rel, err := filepath.Rel(filepath.Dir(at), target)
			if err != nil {
				return err
			}
			return os.Symlink(rel, at)
		}},
		{"hard link external data", "onnx/model.onnx_data", "has 2 hard links", os.Link},
		{"hard link config", "config.json", "has 2 hard links", os.Link},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			target, secret := canary(t)
			dir := writeONNXFolder(t, onnxFiles(t, kindEmbed))
			at := filepath.Join(dir, filepath.FromSlash(tc.file))
			_ = os.Remove(at)
			if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.link(target, at); err != nil {
				t.Fatal(err)
			}
			_, err := s.Import(context.Background(), dir, ImportOptions{Name: "evil/links"}, nil)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("import = %v; want ErrInvalidModel naming %s and saying %q", err, tc.file, tc.why)
			}
			if files := contentFiles(t, s.Root()); len(files) != 0 {
				t.Errorf("store holds %v after the refused import", files)
			}
			if storeHolds(t, s, secret) {
				t.Error("the canary's bytes reached the store")
			}
		})
	}
}

// Links that stay inside the folder are followed, and so are those of a
// Hugging Face cache snapshot into its repository's blobs/ — but not a blob
// there that is itself a link to a file elsewhere.
func TestImportFolderFollowsLinksInside(t *testing.T) {
	t.Run("inside the folder", func(t *testing.T) {
		s := newTestStore(t)
		dir := writeONNXFolder(t, onnxFiles(t, kindEmbed))
		tok := filepath.Join(dir, "tokenizer.json")
		if err := os.Rename(tok, filepath.Join(dir, "real-tokenizer.json")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real-tokenizer.json", tok); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(context.Background(), dir, ImportOptions{Name: "ok/inside"}, nil); err != nil {
			t.Fatal(err)
		}
	})
	snapshot := func(t *testing.T) (snap, blobs string) {
		repo := filepath.Join(t.TempDir(), "models--org--embed")
		snap = filepath.Join(repo, "snapshots", "0123abcd")
		blobs = filepath.Join(repo, "blobs")
		for p, b := range onnxFiles(t, kindEmbed) {
			blob := filepath.Join(blobs, sha256Hex(b))
			writeFile(t, blob, b)
			at := filepath.Join(snap, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(filepath.Dir(at), blob)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(rel, at); err != nil {
				t.Fatal(err)
			}
		}
		return snap, blobs
	}
	t.Run("Hugging Face cache snapshot", func(t *testing.T) {
		s := newTestStore(t)
		snap, _ := snapshot(t)
		m, err := s.Import(context.Background(), snap, ImportOptions{Name: "ok/snapshot"}, nil)
		if err != nil || len(m.Files) < 4 {
			t.Fatalf("import = %+v, %v", m, err)
		}
	})
	t.Run("snapshot blob linking outside", func(t *testing.T) {
		s := newTestStore(t)
		snap, blobs := snapshot(t)
		target, secret := canary(t)
		cfg, err := filepath.EvalSymlinks(filepath.Join(snap, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, cfg); err != nil {
			t.Fatal(err)
		}
		_, err = s.Import(context.Background(), snap, ImportOptions{Name: "evil/snapshot"}, nil)
		if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "outside the folder") {
			t.Fatalf("import = %v (blobs %s)", err, blobs)
		}
		if storeHolds(t, s, secret) || len(contentFiles(t, s.Root())) != 0 {
			t.Error("the refused import left files in the store")
		}
	})
}

// A GGUF the user names through a symlink is imported: following a link the
// user chose is what they asked for.
func TestImportGGUFThroughUserSymlink(t *testing.T) {
	s := newTestStore(t)
	real := writeTemp(t, "real.gguf", tinyGGUF(t))
	link := filepath.Join(t.TempDir(), "mine.gguf")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	m, err := s.Import(context.Background(), link, ImportOptions{Name: "mine/tiny"}, nil)
	if err != nil || m.Files[0].Digest != "sha256:"+sha256Hex(tinyGGUF(t)) {
		t.Fatalf("import = %+v, %v", m, err)
	}
}
