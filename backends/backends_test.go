package backends

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/testenv"
)

func TestCheckMissing(t *testing.T) {
	root := t.TempDir()
	st := Libs{Root: root}.Check()
	if len(st) != 2 {
		t.Fatalf("got %d statuses", len(st))
	}
	for _, s := range st {
		if s.Installed || len(s.Missing) == 0 {
			t.Fatalf("%s reported installed in an empty dir: %+v", s.Name, s)
		}
		if msg := s.Error(); !strings.Contains(msg, "scripts/bootstrap --lib-dir "+root) {
			t.Fatalf("message lacks the fix: %s", msg)
		}
	}
	if got := strings.Join(st[0].Missing, ","); got != "libllama.so,libggml.so,libggml-base.so,libggml-cpu*.so" {
		t.Fatalf("llama missing = %s", got)
	}
}

func TestCheckGPUBackends(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "llama")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu-x64.so", "libggml-vulkan.so"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Libs{Root: root}.Check()[0]
	if !s.Installed || len(s.GPU) != 1 || s.GPU[0] != "vulkan" {
		t.Fatalf("status = %+v", s)
	}
}

// TestBootstrappedLibsComplete checks the real install made by scripts/bootstrap.
func TestBootstrappedLibsComplete(t *testing.T) {
	for _, s := range (Libs{Root: testenv.LibDir(t)}).Check() {
		if !s.Installed {
			t.Fatal(s.Error())
		}
		if s.Version == "" {
			t.Errorf("%s: no version recorded by scripts/bootstrap", s.Name)
		}
	}
}
