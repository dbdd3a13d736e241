package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records the first Fatalf and stops its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatal runs fn with a fatalTB and returns the message it failed with ("" when it
// returned normally).
func fatal(t *testing.T, fn func(testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// Missing assets fail the test with the command that installs them; installed
// ones are found under the lib dir.
func TestLlamaAssetsFailsWithTheInstallCommand(t *testing.T) {
	lib := t.TempDir()
	t.Setenv("MODELD_LIB_DIR", lib)
	for name, fn := range map[string]func(testing.TB){
		"LlamaAssets":   func(tb testing.TB) { LlamaAssets(tb) },
		"LlamaTemplate": func(tb testing.TB) { LlamaTemplate(tb, "x") },
		"LlamaVocab":    func(tb testing.TB) { LlamaVocab(tb, "x") },
	} {
		if msg := fatal(t, fn); !strings.Contains(msg, "scripts/fetch-llama-assets") {
			t.Errorf("%s with nothing installed: %q, want the install command", name, msg)
		}
	}
	dir := filepath.Join(lib, "llama-assets")
	for _, p := range []string{".installed", "templates/t.jinja", "vocab/ggml-vocab-v.gguf"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if msg := fatal(t, func(tb testing.TB) {
		got = []string{LlamaAssets(tb), LlamaTemplate(tb, "t"), LlamaVocab(tb, "v")}
	}); msg != "" {
		t.Fatalf("installed assets: %s", msg)
	}
	want := []string{dir, filepath.Join(dir, "templates", "t.jinja"), filepath.Join(dir, "vocab", "ggml-vocab-v.gguf")}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %v, want %v", got, want)
	}
	if msg := fatal(t, func(tb testing.TB) { LlamaTemplate(tb, "missing") }); !strings.Contains(msg, "--force") {
		t.Errorf("a missing template: %q, want the reinstall command", msg)
	}
}
