// Command bench-batch-cost measures what a decode step of k tokens costs
// against a step of one, llama-bench style, on the llama.cpp library called
// directly: after a prompt, one sequence decodes steps of k tokens (every
// one with logits, as prompt lookup's verification asks) at the next
// positions, and each step's KV is dropped again, so that every step sees
// the same context. Step sizes are interleaved (one step of every size,
// then the next round) so that load from other processes spreads over all
// of them; each figure is the median.
//
//	go run ./scripts/bench-batch-cost                                   # the benchmark model
//	go run ./scripts/bench-batch-cost -model ../shared/models/stories260K/stories260K.gguf
//	go run ./scripts/bench-batch-cost -sizes 1,2,4,8,9 -rounds 200 -threads 1 -batch-threads 2
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	llama "github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/ggufgen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-batch-cost:", err)
		os.Exit(1)
	}
}

func run() error {
	libDir := flag.String("lib", defaultLibDir(), "llama.cpp library dir (scripts/bootstrap installs it)")
	model := flag.String("model", "", "GGUF model (default: generate the benchmark model into a temp dir)")
	sizes := flag.String("sizes", "1,2,4,8", "comma-separated step sizes in tokens")
	rounds := flag.Int("rounds", 100, "steps of each size (the median is reported)")
	context := flag.Int("context", 256, "tokens of context before the steps")
	threads := flag.Int("threads", 1, "threads of one-token steps (modeld's default on 2 CPUs)")
	batchThreads := flag.Int("batch-threads", 2, "threads of multi-token steps (modeld's default on 2 CPUs)")
	flag.Parse()
	var ks []int
	for _, f := range strings.Split(*sizes, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return fmt.Errorf("bad step size %q", f)
		}
		ks = append(ks, k)
	}
	path := *model
	if path == "" {
		dir, err := os.MkdirTemp("", "bench-batch-cost")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.gguf")
		if err := ggufgen.WriteFile(path, ggufgen.Bench(ggufgen.SPM)); err != nil {
			return err
		}
	}
	if err := llama.Init(*libDir); err != nil {
		return err
	}
	mp := yz.ModelDefaultParams()
	mp.SetCPUOnly()
	m, err := yz.ModelLoadFromFile(path, mp)
	if err != nil {
		return err
	}
	defer yz.ModelFree(m)
	cp := yz.ContextDefaultParams()
	cp.NCtx = uint32((*context + 64 + 255) / 256 * 256)
	cp.NBatch, cp.NUbatch = 512, 512
	cp.NThreads, cp.NThreadsBatch = int32(*threads), int32(*batchThreads)
	lctx, err := yz.InitFromModel(m, cp)
	if err != nil {
		return err
	}
	defer yz.Free(lctx)
	mem, err := yz.GetMemory(lctx)
	if err != nil {
		return err
	}
	nVocab := int(yz.VocabNTokens(yz.ModelGetVocab(m)))
	tok := func(i int) yz.Token { return yz.Token(3 + i%(nVocab-3)) }
	prompt := make([]yz.Token, *context)
	for i := range prompt {
		prompt[i] = tok(i * 7)
	}
	if ret, _ := yz.Decode(lctx, yz.BatchGetOne(prompt)); ret != 0 {
		return fmt.Errorf("prompt decode returned %d", ret)
	}
	batch := yz.BatchInit(64, 0, 1)
	defer yz.BatchFree(batch)
	seq := []yz.SeqId{0}
	step := func(k int) (time.Duration, error) {
		_ = batch.Clear()
		for j := 0; j < k; j++ {
			_ = batch.Add(tok(*context+j), yz.Pos(*context+j), seq, true)
		}
		start := time.Now()
		ret, err := yz.Decode(lctx, batch)
		d := time.Since(start)
		if err != nil || ret != 0 {
			return 0, fmt.Errorf("decode of %d tokens returned %d (%v)", k, ret, err)
		}
		if _, err := yz.MemorySeqRm(mem, 0, yz.Pos(*context), -1); err != nil {
			return 0, err
		}
		return d, nil
	}
	times := make([][]float64, len(ks))
	for _, k := range ks { // warm up every graph size
		if _, err := step(k); err != nil {
			return err
		}
	}
	for r := 0; r < *rounds; r++ {
		for i, k := range ks {
			d, err := step(k)
			if err != nil {
				return err
			}
			times[i] = append(times[i], d.Seconds()*1000)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("model %s (%s), context %d, threads %d/%d, %d rounds, load %s\n", filepath.Base(path), yz.ModelDesc(m), *context, *threads, *batchThreads, *rounds, strings.Fields(string(load) + " ? ? ?")[:3])
	fmt.Printf("%6s  %10s  %14s  %12s\n", "tokens", "ms/step", "× one token", "ms/token")
	base := median(times[0]) * float64(ks[0])
	for i, k := range ks {
		ms := median(times[i])
		fmt.Printf("%6d  %10.3f  %14.2f  %12.3f\n", k, ms, ms/base, ms/float64(k))
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func defaultLibDir() string {
	if d := os.Getenv("MODELD_LIB_DIR"); d != "" {
		return filepath.Join(d, "llama")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "modeld", "lib", "llama")
}
