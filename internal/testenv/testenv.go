// Package testenv locates what modeld's tests need from the machine: the native
// runtime libraries installed by scripts/bootstrap. A missing library fails the
// test with the command that installs it; it never skips.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// LibDir returns the runtime-library root (holding llama/ and onnxruntime/):
// $MODELD_LIB_DIR, else $MODELD_HOME/lib, else $XDG_DATA_HOME/modeld/lib, else
// ~/.local/share/modeld/lib — the same rule as scripts/bootstrap.
func LibDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MODELD_LIB_DIR")
	if dir == "" {
		if home := os.Getenv("MODELD_HOME"); home != "" {
			dir = filepath.Join(home, "lib")
		} else if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
			dir = filepath.Join(xdg, "modeld", "lib")
		} else {
			h, err := os.UserHomeDir()
			if err != nil {
				t.Fatalf("testenv: no home directory: %v", err)
			}
			dir = filepath.Join(h, ".local", "share", "modeld", "lib")
		}
	}
	return dir
}

// LlamaDir returns the llama.cpp library dir, failing the test when it is not installed.
func LlamaDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(LibDir(t), "llama")
	requireFile(t, filepath.Join(dir, "libllama.so"))
	return dir
}

// ONNXRuntimeLib returns the path of libonnxruntime.so.1, failing the test when it is
// not installed.
func ONNXRuntimeLib(t testing.TB) string {
	t.Helper()
	p := filepath.Join(LibDir(t), "onnxruntime", "libonnxruntime.so.1")
	requireFile(t, p)
	return p
}

func requireFile(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("runtime library missing: %v; install it with scripts/bootstrap (or set MODELD_LIB_DIR)", err)
	}
}
