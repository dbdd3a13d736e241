// Package grammartest holds what the grammar writers' tests share: the
// random-weight model whose vocabulary llama.cpp's grammar parser and
// sampler run on (with random weights only the grammar can make an output
// valid). It is for tests only and holds no grammar logic.
package grammartest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

var tiny struct {
	once  sync.Once
	model yz.Model
	vocab yz.Vocab
	err   error
}

// TinyModel is the process-wide tiny random-weight model (a BPE vocabulary),
// loaded once through the installed llama.cpp libraries; a missing library
// fails t.
func TinyModel(t testing.TB) (yz.Model, yz.Vocab) {
	t.Helper()
	dir := testenv.LlamaDir(t)
	tiny.once.Do(func() {
		if tiny.err = engine.Init(dir); tiny.err != nil {
			return
		}
		tmp, err := os.MkdirTemp("", "grammar-test-")
		if err != nil {
			tiny.err = err
			return
		}
		defer os.RemoveAll(tmp)
		path := filepath.Join(tmp, "tiny.gguf")
		if tiny.err = ggufgen.WriteFile(path, ggufgen.Tiny(ggufgen.BPE)); tiny.err != nil {
			return
		}
		tiny.model, tiny.err = yz.ModelLoadFromFile(path, yz.ModelDefaultParams())
		if tiny.err == nil {
			tiny.vocab = yz.ModelGetVocab(tiny.model)
		}
	})
	if tiny.err != nil {
		t.Fatal(tiny.err)
	}
	return tiny.model, tiny.vocab
}
