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
	"strconv"
	"strings"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/llama/engine"
)

type localParams struct {
	model, libRoot, modeld, prompt string
	threads, ctx, tokens, runs     int
	layers                         string
}

// runLocal measures, in turn for each run, llama.cpp through yzma with
// nothing between (this process), modeld's engine in this process, and
// the engine in a runner process read by this one (the daemon's client).
func runLocal(args []string) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	var p localParams
	fs.StringVar(&p.model, "model", "", "GGUF model (required)")
	fs.StringVar(&p.libRoot, "lib", "", "runtime-library root with llama/ inside (required)")
	fs.StringVar(&p.modeld, "modeld", "", "modeld binary: also measure the engine in a runner process")
	fs.StringVar(&p.prompt, "prompt", "Hello world, tell me a story about the water", "prompt text")
	fs.IntVar(&p.threads, "threads", 2, "threads of one-token decode steps (modeld serve --threads)")
	fs.IntVar(&p.ctx, "ctx", 1024, "context size of one sequence")
	fs.IntVar(&p.tokens, "tokens", 256, "tokens to generate per run")
	fs.IntVar(&p.runs, "runs", 5, "runs of each layer, interleaved")
	fs.StringVar(&p.layers, "layers", "direct,engine,runner", "the layers to measure, in this process (each has llama.cpp threads of its own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.model == "" || p.libRoot == "" {
		return errors.New("local: -model and -lib are required")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := engine.Init(filepath.Join(p.libRoot, "llama")); err != nil {
		return err
	}
	opts := llama.Options{Slots: 4, Threads: p.threads, BatchThreads: engine.DefaultBatchThreads(), ContextSize: p.ctx}
	want := func(name string) bool { return slices.Contains(strings.Split(p.layers, ","), name) }
	var err error
	var d *direct
	if want("direct") {
		if d, err = openDirect(p, opts.BatchThreads); err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		defer d.close()
	}
	var m *engine.Model
	if want("engine") {
		if m, err = engine.Open(p.model, opts); err != nil {
			return err
		}
		defer m.Close()
	}
	var rn *llama.Runner
	if p.modeld != "" && want("runner") {
		rn, err = llama.StartRunner(context.Background(), llama.RunnerOptions{
			ModelPath: p.model, LibRoot: p.libRoot, Options: opts,
			Command: []string{p.modeld, "runner"}, LogLevel: slog.LevelWarn,
		})
		if err != nil {
			return fmt.Errorf("start runner: %w", err)
		}
		defer rn.Close()
	}
	res := result{Threads: p.threads, Tokens: p.tokens}
	direct := layer{Name: "llama.cpp direct (yzma)", Procs: []string{"process"}}
	inproc := layer{Name: "engine in-process", Procs: []string{"process"}}
	runner := layer{Name: "engine in a runner", Procs: []string{"runner", "client"}}
	self := newMeter([]string{"self"}, []int{p.threads})
	for i := 0; i <= p.runs; i++ { // run 0 warms up and is dropped
		if d != nil {
			r, err := d.decode(self)
			if err != nil {
				return fmt.Errorf("direct: %w", err)
			}
			if i > 0 {
				direct.Runs = append(direct.Runs, r)
			}
		}
		if m != nil {
			r, err := streamEngine(m, p, self)
			if err != nil {
				return fmt.Errorf("engine: %w", err)
			}
			if i > 0 {
				inproc.Runs = append(inproc.Runs, r)
			}
		}
		if rn != nil {
			mt := newMeter([]string{strconv.Itoa(rn.PID()), "self"}, []int{p.threads, 0})
			r, err := streamEngine(rn, p, mt)
			if err != nil {
				return fmt.Errorf("runner: %w", err)
			}
			if i > 0 {
				runner.Runs = append(runner.Runs, r)
			}
		}
	}
	if d != nil {
		res.Layers = append(res.Layers, direct)
	}
	if m != nil {
		res.Layers = append(res.Layers, inproc)
	}
	if rn != nil {
		res.Layers = append(res.Layers, runner)
	}
	return printJSON(res)
}

type generator interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	Generate(ctx context.Context, req llama.Request) (<-chan llama.Event, error)
}

// streamEngine generates p.tokens greedily and measures from the first
// token's event to the last one's.
func streamEngine(g generator, p localParams, mt *meter) (run, error) {
	ids, err := g.Tokenize(p.prompt, true, false)
	if err != nil {
		return run{}, err
	}
	ch, err := g.Generate(context.Background(), llama.Request{Prompt: ids, MaxTokens: p.tokens})
	if err != nil {
		return run{}, err
	}
	var r run
	var start, last time.Time
	n := 0
	for ev := range ch {
		if ev.Err != nil && err == nil {
			err = ev.Err
		}
		if ev.Done {
			continue
		}
		n++
		last = time.Now()
		if n == 1 {
			start = last
			if err = mt.start(); err != nil {
				for range ch {
				}
				return r, err
			}
		}
	}
	if err != nil {
		return r, err
	}
	if n != p.tokens {
		return r, fmt.Errorf("%d tokens, want %d", n, p.tokens)
	}
	r.Procs, err = mt.stop()
	r.Tokens, r.WallNs = n-1, last.Sub(start).Nanoseconds()
	return r, err
}

// direct drives llama.cpp through yzma: one llama_decode per token and a
// greedy sampler, the floor under any server.
type direct struct {
	model yz.Model
	lctx  yz.Context
	mem   yz.Memory
	smpl  yz.Sampler
	ids   []yz.Token
	n     int
	pools []yz.Threadpool
}

func openDirect(p localParams, batchThreads int) (*direct, error) {
	mp := yz.ModelDefaultParams()
	mp.SetCPUOnly()
	model, err := yz.ModelLoadFromFile(p.model, mp)
	if err != nil {
		return nil, err
	}
	cp := yz.ContextDefaultParams()
	cp.NCtx = uint32(p.ctx)
	cp.NBatch = 512
	cp.NSeqMax = 1
	cp.NThreads = int32(p.threads)
	cp.NThreadsBatch = int32(batchThreads)
	lctx, err := yz.InitFromModel(model, cp)
	if err != nil {
		_ = yz.ModelFree(model)
		return nil, err
	}
	// Thread pools of the context's own, as the engine attaches them: without
	// them the prebuilt backend makes and joins threads at every decode.
	var pools []yz.Threadpool
	for _, n := range []int{p.threads, batchThreads} {
		if len(pools) == 1 && n == p.threads {
			break // one pool for both, as the engine does when the counts agree
		}
		tp := yz.ThreadpoolParamsDefault(int32(n))
		pool, err := yz.ThreadpoolNew(&tp)
		if err != nil {
			return nil, fmt.Errorf("thread pool: %w", err)
		}
		pools = append(pools, pool)
	}
	yz.AttachThreadpool(lctx, uintptr(pools[0]), uintptr(pools[len(pools)-1]))
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		return nil, err
	}
	d := &direct{model: model, lctx: lctx, mem: mem, n: p.tokens, pools: pools,
		ids: yz.Tokenize(yz.ModelGetVocab(model), p.prompt, true, false)}
	d.smpl = yz.SamplerChainInit(yz.SamplerChainDefaultParams())
	yz.SamplerChainAdd(d.smpl, yz.SamplerInitGreedy())
	return d, nil
}

func (d *direct) close() {
	yz.SamplerFree(d.smpl)
	_ = yz.Free(d.lctx)
	for _, p := range d.pools {
		yz.ThreadpoolFree(p)
	}
	_ = yz.ModelFree(d.model)
}

func (d *direct) decode(mt *meter) (run, error) {
	var r run
	if err := yz.MemoryClear(d.mem, true); err != nil {
		return r, err
	}
	if ret, err := yz.Decode(d.lctx, yz.BatchGetOne(d.ids)); ret != 0 || err != nil {
		return r, fmt.Errorf("prompt decode returned %d: %v", ret, err)
	}
	tok := yz.SamplerSample(d.smpl, d.lctx, -1)
	if err := mt.start(); err != nil {
		return r, err
	}
	start := time.Now()
	for i := 1; i < d.n; i++ {
		if ret, err := yz.Decode(d.lctx, yz.BatchGetOne([]yz.Token{tok})); ret != 0 || err != nil {
			return r, fmt.Errorf("decode returned %d: %v", ret, err)
		}
		tok = yz.SamplerSample(d.smpl, d.lctx, -1)
	}
	r.WallNs = time.Since(start).Nanoseconds()
	var err error
	r.Procs, err = mt.stop()
	r.Tokens = d.n - 1
	return r, err
}
