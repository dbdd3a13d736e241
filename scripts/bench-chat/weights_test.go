package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// A token reads every tensor but the embedding table, and the file is the
// tensors plus its header: so bytes per token is below the file's size by
// at least the embedding, and the embedding is counted once.
func TestWeightsPerToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := ggufgen.WriteFile(path, ggufgen.Options{Type: ggufgen.F16}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runWeights([]string{"-model", path}, &out); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Tensor, Embedding, PerToken int64
		Tied                        bool
	}
	var raw map[string]any
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	r.Tensor, r.Embedding, r.PerToken = int64(raw["tensor_bytes"].(float64)), int64(raw["embedding_bytes"].(float64)), int64(raw["bytes_per_token"].(float64))
	r.Tied = raw["output_tied"].(bool)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tied || r.Embedding <= 0 || r.PerToken != r.Tensor-r.Embedding || r.Tensor >= fi.Size() {
		t.Fatalf("weights %+v for a file of %d bytes", r, fi.Size())
	}
	if err := runWeights(nil, &out); err == nil {
		t.Fatal("no -model was accepted")
	}
}

// TestMeasureReadReadsEveryWord: the read sums every word of the buffer
// (each run, all threads), and gives a rate.
func TestMeasureReadReadsEveryWord(t *testing.T) {
	buf := make([]uint64, 1<<12)
	var want uint64
	for i := range buf {
		buf[i] = uint64(i)
		want += uint64(i)
	}
	rate := measureRead(buf, 2, 3)
	if readSink != 3*want {
		t.Errorf("sum %d, want %d (3 runs of %d)", readSink, 3*want, want)
	}
	if !(rate > 0) {
		t.Errorf("rate %v", rate)
	}
}
