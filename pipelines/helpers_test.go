package pipelines

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/internal/testenv"
)

func testOptions(t testing.TB) Options {
	t.Helper()
	rt, err := onnx.Init(testenv.ONNXRuntimeLib(t))
	if err != nil {
		t.Fatalf("onnx.Init: %v", err)
	}
	return Options{Runtime: rt, Threads: 1}
}

// modelDir is a committed test model (scripts/gen-onnx/gen.py writes them).
func modelDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join("..", "testdata", "onnx", name)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("test model missing (run scripts/gen-onnx/gen.py): %v", err)
	}
	return dir
}

// readGolden decodes testdata/onnx/goldens/name (scripts/goldens/pipelines writes them).
func readGolden(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "onnx", "goldens", name))
	if err != nil {
		t.Fatalf("golden missing (run scripts/goldens/pipelines/make-goldens.mjs): %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func closeP(t testing.TB, p Pipeline) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func maxAbsDiff32(a []float32, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-b[i]))
	}
	return d
}
