package llama

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// The runner process refuses the 10^6-deep nesting with a clear error
// instead of dying of a stack overflow.
func TestRunnerRefusesNestedArrays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested.gguf")
	if err := os.WriteFile(path, ggufgen.NestedArrays(1_000_000), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := StartRunner(context.Background(), runnerOpts(t, path, Options{Slots: 1, ContextSize: 128}))
	if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "nested deeper than 1") {
		t.Fatalf("StartRunner = %v, want ErrInvalidModel about the nesting", err)
	}
	if strings.Contains(err.Error(), "stack overflow") {
		t.Fatalf("the runner crashed: %v", err)
	}
}
