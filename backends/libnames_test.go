package backends

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckDarwinLayout: on macOS the libraries are .dylib files (the ggml
// backends stay .so) and ONNX Runtime is libonnxruntime.1.dylib; the Linux
// names are neither needed nor enough there.
func TestCheckDarwinLayout(t *testing.T) {
	root := t.TempDir()
	write := func(dir string, files ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(root, dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("llama", "libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu-x64.so")
	write("onnxruntime", "libonnxruntime.so.1")
	mac := Libs{Root: root, GOOS: "darwin"}
	st := mac.Check()
	if st[0].Installed || strings.Join(st[0].Missing, ",") != "libllama.dylib,libggml.dylib,libggml-base.dylib" {
		t.Fatalf("darwin llama with Linux files = %+v", st[0])
	}
	if st[1].Installed || strings.Join(st[1].Missing, ",") != "libonnxruntime.1.dylib" {
		t.Fatalf("darwin onnxruntime with the Linux file = %+v", st[1])
	}

	write("llama", "libllama.dylib", "libggml.dylib", "libggml-base.dylib", "libggml-metal.so")
	write("onnxruntime", "libonnxruntime.1.dylib")
	st = mac.Check()
	if !st[0].Installed || strings.Join(st[0].GPU, ",") != "metal" {
		t.Fatalf("darwin llama = %+v", st[0])
	}
	if !st[1].Installed {
		t.Fatalf("darwin onnxruntime = %+v", st[1])
	}
	if got, want := mac.ONNXRuntimePath(), filepath.Join(root, "onnxruntime", "libonnxruntime.1.dylib"); got != want {
		t.Fatalf("ONNXRuntimePath = %s, want %s", got, want)
	}
	if got := (Libs{Root: root, GOOS: "linux"}).ONNXRuntimePath(); filepath.Base(got) != "libonnxruntime.so.1" {
		t.Fatalf("linux ONNXRuntimePath = %s", got)
	}
}

// TestCheckMultimodal: llama.cpp's multimodal library is optional: the
// libraries are installed without it, and Check and HasMultimodal say
// whether it is there, by the platform's name.
func TestCheckMultimodal(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "llama")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu-x64.so"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := Libs{Root: root, GOOS: "linux"}
	if st := l.Check()[0]; !st.Installed || st.Multimodal || l.HasMultimodal() {
		t.Fatalf("without libmtmd.so: %+v", st)
	}
	if err := os.WriteFile(filepath.Join(dir, "libmtmd.dylib"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l.HasMultimodal() {
		t.Fatal("the macOS name counts on Linux")
	}
	if err := os.WriteFile(filepath.Join(dir, "libmtmd.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st := l.Check()[0]; !st.Multimodal || !l.HasMultimodal() {
		t.Fatalf("with libmtmd.so: %+v", st)
	}
}
