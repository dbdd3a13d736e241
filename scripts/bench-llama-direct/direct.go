package main

import (
	"fmt"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// direct drives llama.cpp through yzma with no engine in between.
type direct struct {
	model  yz.Model
	lctx   yz.Context
	mem    yz.Memory
	smpl   yz.Sampler
	prompt []yz.Token
	n      int
}

func newDirect(path, prompt string, threads, batchThreads, n int) (*direct, error) {
	mp := yz.ModelDefaultParams()
	mp.SetCPUOnly()
	model, err := yz.ModelLoadFromFile(path, mp)
	if err != nil {
		return nil, err
	}
	cp := yz.ContextDefaultParams()
	cp.NCtx = uint32((n + 512 + 255) / 256 * 256)
	cp.NBatch = 512
	cp.NUbatch = 512
	cp.NThreads = int32(threads)
	cp.NThreadsBatch = int32(batchThreads)
	lctx, err := yz.InitFromModel(model, cp)
	if err != nil {
		_ = yz.ModelFree(model)
		return nil, err
	}
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		return nil, err
	}
	d := &direct{model: model, lctx: lctx, mem: mem, n: n,
		prompt: yz.Tokenize(yz.ModelGetVocab(model), prompt, true, false)}
	d.smpl = yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	yz.SamplerChainAdd(d.smpl, yz.SamplerInitGreedy())
	// Warm up: the first decode allocates the compute graphs.
	if _, err := d.promptEval(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *direct) close() {
	yz.SamplerFree(d.smpl)
	_ = yz.Free(d.lctx)
	_ = yz.ModelFree(d.model)
}

// promptEval times one llama_decode of a 256-token prompt.
func (d *direct) promptEval() (float64, error) {
	if err := yz.MemoryClear(d.mem, true); err != nil {
		return 0, err
	}
	toks := make([]yz.Token, 256)
	for i := range toks {
		toks[i] = yz.Token(300 + i%200)
	}
	start := time.Now()
	if ret, _ := yz.Decode(d.lctx, yz.BatchGetOne(toks)); ret != 0 {
		return 0, fmt.Errorf("prompt decode returned %d", ret)
	}
	return float64(len(toks)) / time.Since(start).Seconds(), nil
}

// decode evaluates the prompt, then times greedy decoding of n tokens, one
// llama_decode per token.
func (d *direct) decode() (float64, error) {
	if err := yz.MemoryClear(d.mem, true); err != nil {
		return 0, err
	}
	if ret, _ := yz.Decode(d.lctx, yz.BatchGetOne(d.prompt)); ret != 0 {
		return 0, fmt.Errorf("prompt decode returned %d", ret)
	}
	tok := yz.SamplerSample(d.smpl, d.lctx, -1)
	start := time.Now()
	for i := 0; i < d.n; i++ {
		next := []yz.Token{tok}
		if ret, _ := yz.Decode(d.lctx, yz.BatchGetOne(next)); ret != 0 {
			return 0, fmt.Errorf("decode returned %d", ret)
		}
		tok = yz.SamplerSample(d.smpl, d.lctx, -1)
	}
	return float64(d.n) / time.Since(start).Seconds(), nil
}
