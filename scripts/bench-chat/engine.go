package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/llama/engine"
)

// engineParams are the settings shared by every in-process measurement.
type engineParams struct {
	model        string
	libRoot      string
	modeld       string
	prompt       string
	threads      int
	batchThreads int
	ctx          int
	slots        int
	tokens       int
	runs         int
	streams      int
}

// layerResult is one way of calling llama.cpp: per-run decode speeds, times
// to first token (one prompt variant per run), and the aggregate decode
// speed of concurrent streams, when measured.
type layerResult struct {
	Decode       []float64 `json:"decode"`
	TTFTMs       []float64 `json:"ttftMs"`
	Aggregate    []float64 `json:"aggregate,omitempty"`
	PromptTokens int       `json:"promptTokens"`
	IDs          []int32   `json:"ids,omitempty"`
	// ReuseDiffers counts the decode runs after the first (which reuse its
	// prompt KV) whose greedy ids differ from the first run's.
	ReuseDiffers int `json:"reuseDiffers"`
}

type engineResult struct {
	Threads      int          `json:"threads"`
	BatchThreads int          `json:"batchThreads"`
	Context      int          `json:"context"`
	Tokens       int          `json:"tokens"`
	Streams      int          `json:"streams"`
	Direct       layerResult  `json:"direct"`
	Engine       layerResult  `json:"engine"`
	Runner       *layerResult `json:"runner,omitempty"`
}

func runEngine(args []string) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	var p engineParams
	fs.StringVar(&p.model, "model", "", "GGUF model (required)")
	fs.StringVar(&p.libRoot, "lib", "", "runtime-library root with llama/ inside (required)")
	fs.StringVar(&p.modeld, "modeld", "", "modeld binary: also measure the engine in a runner process")
	fs.StringVar(&p.prompt, "prompt", "", "prompt text (required)")
	fs.IntVar(&p.threads, "threads", 1, "threads of one-token decode steps")
	fs.IntVar(&p.batchThreads, "batch-threads", 0, "threads of bigger steps (0 = the engine's default, as modeld serve uses)")
	fs.IntVar(&p.ctx, "ctx", 1024, "context size of one sequence")
	fs.IntVar(&p.slots, "slots", 4, "engine slots")
	fs.IntVar(&p.tokens, "tokens", 256, "tokens to generate per run")
	fs.IntVar(&p.runs, "runs", 5, "runs per measurement")
	fs.IntVar(&p.streams, "streams", 4, "concurrent streams of the aggregate measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.model == "" || p.libRoot == "" || p.prompt == "" {
		return errors.New("engine: -model, -lib and -prompt are required")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := engine.Init(filepath.Join(p.libRoot, "llama")); err != nil {
		return err
	}
	if p.batchThreads == 0 {
		p.batchThreads = engine.DefaultBatchThreads()
	}
	res := engineResult{Threads: p.threads, BatchThreads: p.batchThreads, Context: p.ctx, Tokens: p.tokens, Streams: p.streams}
	var err error
	if res.Direct, err = measureDirect(p); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if res.Direct.Aggregate, err = measureDirectBatch(p); err != nil {
		return fmt.Errorf("direct, %d sequences: %w", p.streams, err)
	}
	m, err := engine.Open(p.model, p.engineOptions())
	if err != nil {
		return err
	}
	res.Engine, err = measureGenerator(m, p)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if p.modeld != "" {
		r, err := llama.StartRunner(context.Background(), llama.RunnerOptions{
			ModelPath: p.model, LibRoot: p.libRoot, Options: p.engineOptions(),
			Command: []string{p.modeld, "runner"}, LogLevel: slog.LevelWarn,
		})
		if err != nil {
			return fmt.Errorf("start runner: %w", err)
		}
		lr, err := measureGenerator(r, p)
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		res.Runner = &lr
	}
	return printJSON(res)
}

func (p engineParams) engineOptions() llama.Options {
	return llama.Options{Slots: p.slots, Threads: p.threads, BatchThreads: p.batchThreads, ContextSize: p.ctx}
}

// measureDirect calls llama.cpp through yzma with nothing in between: for
// each run, clear the KV, tokenize a prompt variant, decode it in one batch
// and sample (time to first token), then decode tokens-1 more, one
// llama_decode per token, with a greedy sampler.
func measureDirect(p engineParams) (res layerResult, err error) {
	mp := yz.ModelDefaultParams()
	mp.SetCPUOnly()
	model, err := yz.ModelLoadFromFile(p.model, mp)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, yz.ModelFree(model)) }()
	cp := yz.ContextDefaultParams()
	cp.NCtx = uint32(p.ctx)
	cp.NBatch = 512
	cp.NSeqMax = 1
	cp.NThreads = int32(p.threads)
	cp.NThreadsBatch = int32(p.batchThreads)
	lctx, err := yz.InitFromModel(model, cp)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, yz.Free(lctx)) }()
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		return res, err
	}
	vocab := yz.ModelGetVocab(model)
	smpl := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	yz.SamplerChainAdd(smpl, yz.SamplerInitGreedy())
	defer yz.SamplerFree(smpl)

	for i := 0; i < p.runs; i++ {
		if err := yz.MemoryClear(mem, true); err != nil {
			return res, err
		}
		start := time.Now()
		toks := yz.Tokenize(vocab, variant(p.prompt, i), true, false)
		if ret, err := yz.Decode(lctx, yz.BatchGetOne(toks)); ret != 0 || err != nil {
			return res, fmt.Errorf("prompt decode returned %d: %v", ret, err)
		}
		tok := yz.SamplerSample(smpl, lctx, -1)
		first := time.Now()
		res.TTFTMs = append(res.TTFTMs, ms(first.Sub(start)))
		res.PromptTokens = len(toks)
		for j := 1; j < p.tokens; j++ {
			if ret, err := yz.Decode(lctx, yz.BatchGetOne([]yz.Token{tok})); ret != 0 || err != nil {
				return res, fmt.Errorf("decode returned %d: %v", ret, err)
			}
			tok = yz.SamplerSample(smpl, lctx, -1)
		}
		res.Decode = append(res.Decode, float64(p.tokens-1)/time.Since(first).Seconds())
	}
	return res, nil
}

// measureDirectBatch is the library's own ceiling for concurrent streams:
// p.streams sequences in one llama context, every llama_decode carrying one
// token of each (their prompts decoded together first), greedy sampling.
// It returns the aggregate decode tokens/s of each run.
func measureDirectBatch(p engineParams) (aggs []float64, err error) {
	mp := yz.ModelDefaultParams()
	mp.SetCPUOnly()
	model, err := yz.ModelLoadFromFile(p.model, mp)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, yz.ModelFree(model)) }()
	cp := yz.ContextDefaultParams()
	cp.NCtx = uint32(p.ctx * p.streams)
	cp.NBatch = 512
	cp.NSeqMax = uint32(p.streams)
	cp.KVUnified = 0 // one KV stream per sequence, as the engine makes it
	cp.NThreads = int32(p.threads)
	cp.NThreadsBatch = int32(p.batchThreads)
	lctx, err := yz.InitFromModel(model, cp)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, yz.Free(lctx)) }()
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		return nil, err
	}
	vocab := yz.ModelGetVocab(model)
	smpl := yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	yz.SamplerChainAdd(smpl, yz.SamplerInitGreedy())
	defer yz.SamplerFree(smpl)
	batch := yz.BatchInit(512, 0, 1)
	defer func() { err = errors.Join(err, yz.BatchFree(batch)) }()

	decode := func() error {
		if ret, err := yz.Decode(lctx, batch); ret != 0 || err != nil {
			return fmt.Errorf("decode of %d tokens returned %d: %v", batch.NTokens, ret, err)
		}
		return nil
	}
	for i := 0; i < p.runs; i++ {
		if err := yz.MemoryClear(mem, true); err != nil {
			return nil, err
		}
		_ = batch.Clear()
		pos := make([]yz.Pos, p.streams)
		last := make([]int32, p.streams)
		for k := range p.streams {
			toks := yz.Tokenize(vocab, variant(p.prompt, i*p.streams+k+1), true, false)
			for j, t := range toks {
				if err := batch.Add(t, yz.Pos(j), []yz.SeqId{yz.SeqId(k)}, j == len(toks)-1); err != nil {
					return nil, err
				}
			}
			pos[k], last[k] = yz.Pos(len(toks)), batch.NTokens-1
		}
		if err := decode(); err != nil {
			return nil, err
		}
		next := make([]yz.Token, p.streams)
		for k := range p.streams {
			next[k] = yz.SamplerSample(smpl, lctx, last[k])
		}
		start := time.Now()
		for step := 1; step < p.tokens; step++ {
			_ = batch.Clear()
			for k := range p.streams {
				if err := batch.Add(next[k], pos[k], []yz.SeqId{yz.SeqId(k)}, true); err != nil {
					return nil, err
				}
				pos[k]++
			}
			if err := decode(); err != nil {
				return nil, err
			}
			for k := range p.streams {
				next[k] = yz.SamplerSample(smpl, lctx, int32(k))
			}
		}
		aggs = append(aggs, float64(p.streams*(p.tokens-1))/time.Since(start).Seconds())
	}
	return aggs, nil
}

// generator is what backends/llama's Model and Runner share that the
// benchmark uses.
type generator interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	Generate(ctx context.Context, req llama.Request) (<-chan llama.Event, error)
}

// streamTiming is one generation seen from its caller.
type streamTiming struct {
	start, first, last time.Time
	tokens             int
	ids                []int32
}

// generate tokenizes text and runs one greedy generation of n tokens.
func generate(g generator, text string, n int) (streamTiming, error) {
	t := streamTiming{start: time.Now()}
	ids, err := g.Tokenize(text, true, false)
	if err != nil {
		return t, err
	}
	ch, err := g.Generate(context.Background(), llama.Request{Prompt: ids, MaxTokens: n})
	if err != nil {
		return t, err
	}
	for ev := range ch {
		if ev.Err != nil {
			err = ev.Err
		}
		if ev.Done {
			if ev.Finish != llama.FinishLength && err == nil {
				err = fmt.Errorf("finished with %q after %d tokens, want %d (length)", ev.Finish, t.tokens, n)
			}
			continue
		}
		now := time.Now()
		if t.tokens == 0 {
			t.first = now
		}
		t.last = now
		t.tokens++
		t.ids = append(t.ids, ev.Token)
	}
	return t, err
}

// measureGenerator measures the engine (in this process or in a runner):
// decode speed of the plain prompt, time to first token of one variant per
// run, and the aggregate decode speed of p.streams concurrent variants.
func measureGenerator(g generator, p engineParams) (res layerResult, err error) {
	ids, err := g.Tokenize(p.prompt, true, false)
	if err != nil {
		return res, err
	}
	res.PromptTokens = len(ids)
	for i := 0; i < p.runs; i++ {
		t, err := generate(g, p.prompt, p.tokens)
		if err != nil {
			return res, err
		}
		res.Decode = append(res.Decode, decodeRate(t.tokens, 0, t.last.Sub(t.first).Seconds()))
		if res.IDs == nil {
			res.IDs = t.ids
		} else if !slices.Equal(t.ids, res.IDs) {
			res.ReuseDiffers++
		}
	}
	for i := 0; i < p.runs; i++ {
		t, err := generate(g, variant(p.prompt, i), 2)
		if err != nil {
			return res, err
		}
		res.TTFTMs = append(res.TTFTMs, ms(t.first.Sub(t.start)))
	}
	for i := 0; i < p.runs; i++ {
		agg, err := aggregate(p.streams, func(k int) (streamTiming, error) {
			return generate(g, variant(p.prompt, i*p.streams+k+1), p.tokens)
		})
		if err != nil {
			return res, err
		}
		res.Aggregate = append(res.Aggregate, agg)
	}
	return res, nil
}

// aggregate runs n streams at once and returns the decode tokens/s of all
// of them together: tokens after each stream's first, over the time from
// the earliest first token to the latest last one.
func aggregate(n int, run func(k int) (streamTiming, error)) (float64, error) {
	ts := make([]streamTiming, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[k], errs[k] = run(k)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	var first, last time.Time
	total := 0
	for _, t := range ts {
		total += t.tokens - 1
		if first.IsZero() || t.first.Before(first) {
			first = t.first
		}
		if t.last.After(last) {
			last = t.last
		}
	}
	if !last.After(first) {
		return 0, errors.New("streams gave no decode time")
	}
	return float64(total) / last.Sub(first).Seconds(), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
