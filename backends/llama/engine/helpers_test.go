package engine

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// initLib initialises the native library for a test (once per process; the
// directory is the same for every test).
func initLib(t testing.TB) {
	t.Helper()
	if err := Init(testenv.LlamaDir(t)); err != nil {
		t.Fatal(err)
	}
}

// genModel writes a generated model into the test's temp dir.
func genModel(t testing.TB, o ggufgen.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// openModel opens a generated model with test options and closes it at the end.
func openModel(t testing.TB, o ggufgen.Options, opts Options) *Model {
	t.Helper()
	return openWithHooks(t, o, opts, Hooks{})
}

func openWithHooks(t testing.TB, o ggufgen.Options, opts Options, h Hooks) *Model {
	t.Helper()
	initLib(t)
	if opts.ContextSize == 0 {
		opts.ContextSize = 512
	}
	m, err := open(genModel(t, o), opts, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// result is a drained generation.
type result struct {
	tokens []int32
	text   string
	final  Event
	events int
	// logprobs are the tokens' log-probabilities, one per token (nil
	// where the request asked for none).
	logprobs []*Logprobs
}

func drain(t testing.TB, ch <-chan Event) result {
	t.Helper()
	var r result
	for ev := range ch {
		r.events++
		r.text += ev.Text
		if ev.Done {
			r.final = ev
			continue
		}
		r.tokens = append(r.tokens, ev.Token)
		r.logprobs = append(r.logprobs, ev.Logprobs)
	}
	if !r.final.Done {
		t.Fatal("stream closed without a final event")
	}
	return r
}

func generate(t testing.TB, m *Model, req Request) result {
	t.Helper()
	ch, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return drain(t, ch)
}

func tokenize(t testing.TB, m *Model, text string) []int32 {
	t.Helper()
	ids, err := m.Tokenize(text, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

var bothVocabs = []ggufgen.VocabKind{ggufgen.SPM, ggufgen.BPE}

// parallel runs fn for each i in [0, n) concurrently and waits.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
