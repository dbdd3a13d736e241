package api

import (
	"context"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
)

// testConstraints is the grammar compiler the test servers check requests
// with: llama.cpp's, as the daemon wires it.
var testConstraints backends.Constrainer = llama.Constraints{}

func backendsLibs(t *testing.T) backends.Libs { return backends.Libs{Root: t.TempDir()} }

// byteTokenizer tokenizes a text as its bytes and detokenizes them back, so
// that a fake model's token counts are exact and easy to predict.
type byteTokenizer struct{}

func (byteTokenizer) TokenizeContext(_ context.Context, text string, _, _ bool) ([]int32, error) {
	out := make([]int32, len(text))
	for i := range text {
		out[i] = int32(text[i])
	}
	return out, nil
}

func (byteTokenizer) DetokenizeContext(_ context.Context, ids []int32, _ bool) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}
