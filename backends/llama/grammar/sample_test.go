package grammar

import (
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama/grammar/internal/grammartest"
)

// tinyModel is the random-weight model the sampling tests draw from.
func tinyModel(t *testing.T) (yz.Model, yz.Vocab) { return grammartest.TinyModel(t) }

// compiles reports whether llama.cpp's grammar parser accepts g.
func compiles(t *testing.T, g string) bool {
	t.Helper()
	_, vocab := tinyModel(t)
	s := yz.SamplerInitGrammar(vocab, g, RootRule)
	if s == 0 {
		return false
	}
	yz.SamplerFree(s)
	return true
}

// generate samples up to maxTokens tokens under grammar g with seed; done
// reports whether the model ended (an end-of-generation token) on its own.
func generate(t *testing.T, g string, seed uint32, maxTokens int) (text string, done bool) {
	t.Helper()
	return generateWith(t, g, seed, maxTokens, nil)
}

// generateWith is generate with extra samplers added before the draw.
func generateWith(t *testing.T, g string, seed uint32, maxTokens int, extra func(chain yz.Sampler)) (text string, done bool) {
	t.Helper()
	model, vocab := tinyModel(t)
	gs := yz.SamplerInitGrammar(vocab, g, RootRule)
	if gs == 0 {
		t.Fatalf("llama.cpp rejected the grammar:\n%s", g)
	}
	chain := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	defer yz.SamplerFree(chain)
	yz.SamplerChainAdd(chain, gs)
	if extra != nil {
		extra(chain)
	}
	yz.SamplerChainAdd(chain, yz.SamplerInitDist(seed))
	params := yz.ContextDefaultParams()
	params.NCtx = uint32(maxTokens + 48)
	params.NBatch = 16
	params.NUbatch = 16
	params.NSeqMax = 1
	params.NThreads = 1
	params.NThreadsBatch = 1
	ctx, err := yz.InitFromModel(model, params)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := yz.Free(ctx); err != nil {
			t.Error(err)
		}
	}()
	prompt := yz.Tokenize(vocab, "{", true, false)
	if _, err := yz.Decode(ctx, yz.BatchGetOne(prompt)); err != nil {
		t.Fatal(err)
	}
	var out []byte
	buf := make([]byte, 256)
	for i := 0; i < maxTokens; i++ {
		tok := yz.SamplerSample(chain, ctx, -1)
		if yz.VocabIsEOG(vocab, tok) {
			return string(out), true
		}
		n := yz.TokenToPiece(vocab, tok, buf, 0, false)
		if n < 0 {
			t.Fatalf("token %d: piece longer than %d bytes", tok, len(buf))
		}
		out = append(out, buf[:n]...)
		if _, err := yz.Decode(ctx, yz.BatchGetOne([]yz.Token{tok})); err != nil {
			t.Fatal(err)
		}
	}
	return string(out), false
}
