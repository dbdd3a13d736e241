// Command bench-llama-direct measures the speed of the generated benchmark
// model (internal/ggufgen Bench: ~35 MB, F16) for a list of thread counts,
// two ways: the llama.cpp library called directly through yzma (prompt
// processing of 256 tokens in one llama_decode; greedy decoding with one
// token per llama_decode, the floor any server adds to), and modeld's engine
// (backends/llama Generate), one stream and 4 concurrent streams. The
// engine's thread defaults (llama.DefaultThreads, DefaultBatchThreads) come
// from these numbers.
//
// Runs of the different thread counts are interleaved (run 1 of every
// count, then run 2, ...) so that load from other processes on a shared
// machine spreads over all of them; each cell is the median.
//
//	go run ./scripts/bench-llama-direct                    # threads 1,2
//	go run ./scripts/bench-llama-direct -threads 1,2,4 -tokens 512 -runs 9
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	llama "github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/ggufgen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-llama-direct:", err)
		os.Exit(1)
	}
}

// config is one column of measurements: threads for one-token steps and
// for multi-token steps.
type config struct {
	name          string
	threads       int
	batchThreads  int
	direct        *direct
	engine        *engine
	prompt        []float64
	decode        []float64
	engineOne     []float64
	engineFour    []float64
	engineSkipped bool
}

func run() error {
	libDir := flag.String("lib", defaultLibDir(), "llama.cpp library dir (scripts/bootstrap installs it)")
	model := flag.String("model", "", "GGUF model (default: generate the benchmark model into a temp dir)")
	threadList := flag.String("threads", "1,2", "comma-separated thread counts")
	tokens := flag.Int("tokens", 256, "tokens to generate per run")
	runs := flag.Int("runs", 5, "interleaved runs per measurement (the median is reported)")
	prompt := flag.String("prompt", "Hello world, tell me a story about the water", "prompt text")
	flag.Parse()

	if err := llama.Init(*libDir); err != nil {
		return err
	}
	path := *model
	if path == "" {
		dir, err := os.MkdirTemp("", "bench-llama-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.gguf")
		if err := ggufgen.WriteFile(path, ggufgen.Bench(ggufgen.SPM)); err != nil {
			return err
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}

	var configs []*config
	for _, f := range strings.Split(*threadList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("bad thread count %q", f)
		}
		configs = append(configs, &config{name: strconv.Itoa(n), threads: n, batchThreads: n})
	}
	t, b := llama.DefaultThreads(), llama.DefaultBatchThreads()
	configs = append(configs, &config{name: fmt.Sprintf("default %d/%d", t, b), threads: t, batchThreads: b})

	for _, c := range configs {
		if c.direct, err = newDirect(path, *prompt, c.threads, c.batchThreads, *tokens); err != nil {
			return err
		}
		defer c.direct.close()
		if c.engine, err = newEngine(path, *prompt, c.threads, c.batchThreads, *tokens); err != nil {
			return err
		}
		defer c.engine.close()
	}
	for r := 0; r < *runs; r++ {
		for _, c := range configs {
			pp, err := c.direct.promptEval()
			if err != nil {
				return err
			}
			dec, err := c.direct.decode()
			if err != nil {
				return err
			}
			one, err := c.engine.streams(1)
			if err != nil {
				return err
			}
			four, err := c.engine.streams(4)
			if err != nil {
				return err
			}
			c.prompt = append(c.prompt, pp)
			c.decode = append(c.decode, dec)
			c.engineOne = append(c.engineOne, one)
			c.engineFour = append(c.engineFour, four)
		}
	}

	fmt.Printf("model %s (%.1f MB), llama libs %s, %d tokens per run, median of %d interleaved runs\n",
		path, float64(st.Size())/1e6, llama.LibVersion(), *tokens, *runs)
	fmt.Printf("%-14s %14s %14s %14s %16s %10s\n", "threads", "prompt tok/s", "direct tok/s", "engine tok/s", "engine 4x tok/s", "4x/1x")
	for _, c := range configs {
		one, four := median(c.engineOne), median(c.engineFour)
		fmt.Printf("%-14s %14.1f %14.1f %14.1f %16.1f %10.2f\n", c.name,
			median(c.prompt), median(c.decode), one, four, four/one)
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// defaultLibDir follows scripts/bootstrap: $MODELD_LIB_DIR, $MODELD_HOME/lib,
// $XDG_DATA_HOME/modeld/lib, ~/.local/share/modeld/lib; plus /llama.
func defaultLibDir() string {
	dir := os.Getenv("MODELD_LIB_DIR")
	switch {
	case dir != "":
	case os.Getenv("MODELD_HOME") != "":
		dir = filepath.Join(os.Getenv("MODELD_HOME"), "lib")
	case os.Getenv("XDG_DATA_HOME") != "":
		dir = filepath.Join(os.Getenv("XDG_DATA_HOME"), "modeld", "lib")
	default:
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "share", "modeld", "lib")
	}
	return filepath.Join(dir, "llama")
}
