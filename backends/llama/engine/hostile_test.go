package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// The load check refuses every hostile GGUF with ErrInvalidModel naming the
// file and the fault, before the metadata parser or llama.cpp sees it.
func TestInspectFileRefusesHostileGGUF(t *testing.T) {
	dir := t.TempDir()
	for i, h := range ggufgen.HostileFiles() {
		t.Run(h.Name, func(t *testing.T) {
			path := filepath.Join(dir, "hostile-"+strconv.Itoa(i)+".gguf")
			if err := os.WriteFile(path, h.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := inspectFile(path)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), h.Want) {
				t.Fatalf("inspectFile = %v, want ErrInvalidModel naming the file and saying %q", err, h.Want)
			}
		})
	}
	path := filepath.Join(dir, "good.gguf")
	if err := ggufgen.WriteFile(path, ggufgen.Tiny(ggufgen.BPE)); err != nil {
		t.Fatal(err)
	}
	if facts, err := inspectFile(path); err != nil || facts.arch != "llama" {
		t.Fatalf("good file: %+v, %v", facts, err)
	}
}
