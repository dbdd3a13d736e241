package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modeld/modeld/backends/llama"
)

// bench-chat load: what starting a runner and loading a model costs, by
// phase, for several ways of starting it, measured in interleaved rounds
// (the order rotates each round, so load from other processes falls on all
// of them). Each way is a name, a CPU variant for the runner ("" for ggml's
// own choice among all of them), environment variables added to the
// runner's and optionally another modeld binary (an older build to compare
// with), as -way NAME=VARIANT[,KEY=VALUE...][,bin:PATH]. The phases come
// from the runner's own log: its whole load, and of it llama.cpp's
// libraries with ggml's backends, the GGUF check in Go, llama.cpp's model
// load (llama_model_load_from_file) and the context with its KV cache; and
// StartRunner from its call to its return (the process start, the Go
// runtime and the socket's first answer besides the load). Each runner then
// generates 16 greedy tokens; the run fails when two ways differ in them.
//
//	bench-chat load -modeld bin/modeld -model M.gguf -lib ROOT \
//	    -way all= -way zen4=zen4 -way zen4+thp=zen4,GLIBC_TUNABLES=glibc.malloc.hugetlb=1
func runLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	modeld := fs.String("modeld", "bin/modeld", "modeld binary (its runner subcommand)")
	model := fs.String("model", "", "GGUF model")
	lib := fs.String("lib", "", "runtime-library root")
	rounds := fs.Int("rounds", 5, "rounds; each starts every way once")
	slots := fs.Int("slots", 4, "slots")
	ctx := fs.Int("ctx", 16384, "context per slot")
	threads := fs.Int("threads", 2, "threads")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "the runners' log level (debug adds ggml's backends on their own)")
	var ways listFlag
	fs.Var(&ways, "way", "NAME=VARIANT[,KEY=VALUE...][,bin:PATH] (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *lib == "" || len(ways) == 0 {
		return fmt.Errorf("load: -model, -lib and at least one -way are needed")
	}
	type way struct {
		name, variant, bin string
		env                []string
	}
	var ws []way
	for _, w := range ways {
		name, rest, ok := strings.Cut(w, "=")
		if !ok || name == "" {
			return fmt.Errorf("load: -way %q: want NAME=VARIANT[,KEY=VALUE...][,bin:PATH]", w)
		}
		parts := strings.Split(rest, ",")
		wy := way{name: name, variant: parts[0], bin: *modeld}
		for _, p := range parts[1:] {
			if bin, ok := strings.CutPrefix(p, "bin:"); ok {
				wy.bin = bin
			} else {
				wy.env = append(wy.env, p)
			}
		}
		ws = append(ws, wy)
	}
	phases := []string{"start_ms", "load_ms", "init_ms", "backends_ms", "check_ms", "model_ms", "context_ms", "rss_mib"}
	samples := map[string]map[string][]float64{}
	tokens := map[string][]int32{}
	for r := 0; r < *rounds; r++ {
		for i := range ws {
			w := ws[(i+r)%len(ws)]
			rec := &phaseLog{vals: map[string]float64{}}
			begin := time.Now()
			rn, err := llama.StartRunner(context.Background(), llama.RunnerOptions{
				ModelPath: *model, LibRoot: *lib, CPUVariant: w.variant,
				Options: llama.Options{Slots: *slots, ContextSize: *ctx, Threads: *threads},
				Command: []string{w.bin, "runner"}, Env: append([]string{"CUDA_VISIBLE_DEVICES=", "GGML_VK_VISIBLE_DEVICES="}, w.env...),
				LogLevel: level, Logger: slog.New(rec),
			})
			if err != nil {
				return fmt.Errorf("load: %s: %w", w.name, err)
			}
			rec.set("start_ms", float64(time.Since(begin).Milliseconds()))
			// The runner logs its ready line after it reported ready.
			for t0 := time.Now(); time.Since(t0) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
				if _, ok := rec.get("init_ms"); ok {
					break
				}
			}
			if rss, err := rn.RSS(); err == nil {
				rec.set("rss_mib", float64(rss>>20))
			}
			ids, err := greedyIDs(rn)
			if cerr := rn.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("load: %s: %w", w.name, err)
			}
			if prev, ok := tokens[w.name]; ok && !slices.Equal(prev, ids) {
				return fmt.Errorf("load: %s: greedy tokens changed between rounds: %v, %v", w.name, prev, ids)
			}
			tokens[w.name] = ids
			if samples[w.name] == nil {
				samples[w.name] = map[string][]float64{}
			}
			line := []string{w.name}
			for _, p := range phases {
				v, ok := rec.get(p)
				if !ok {
					continue // an older build's runner does not log it
				}
				samples[w.name][p] = append(samples[w.name][p], v)
				line = append(line, fmt.Sprintf("%s=%.0f", p, v))
			}
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", r+1, *rounds, strings.Join(line, " "))
		}
	}
	first := tokens[ws[0].name]
	for _, w := range ws[1:] {
		if !slices.Equal(tokens[w.name], first) {
			return fmt.Errorf("load: greedy tokens of %s %v differ from %s's %v", w.name, tokens[w.name], ws[0].name, first)
		}
	}
	fmt.Printf("| way | StartRunner (ms) | runner's load (ms) | libraries and backends (ms) | of which ggml's backends (ms) | GGUF check in Go (ms) | llama.cpp's model load (ms) | context and KV cache (ms) | RSS (MiB) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range ws {
		fmt.Printf("| %s |", w.name)
		for _, p := range phases {
			if xs := samples[w.name][p]; len(xs) > 0 {
				fmt.Printf(" %.0f (%s) |", median(xs), joinFloats(xs))
			} else {
				fmt.Printf(" – |")
			}
		}
		fmt.Println()
	}
	fmt.Printf("\nmedians of %d interleaved rounds (each round's values in brackets); greedy tokens equal for every way: %v\n", *rounds, first)
	return nil
}

// greedyIDs is 16 greedy tokens after a short prompt.
func greedyIDs(r *llama.Runner) ([]int32, error) {
	prompt, err := r.Tokenize("Once upon a time", true, true)
	if err != nil {
		return nil, err
	}
	ch, err := r.Generate(context.Background(), llama.Request{Prompt: prompt, MaxTokens: 16})
	if err != nil {
		return nil, err
	}
	var ids []int32
	for ev := range ch {
		if ev.Err != nil {
			return nil, ev.Err
		}
		if !ev.Done {
			ids = append(ids, ev.Token)
		}
	}
	return ids, nil
}

func joinFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, ", ")
}

// phaseLog is a slog handler that keeps the runner's phase timings from
// its log records: load_ms and init_ms of its ready line, backends_ms of
// the engine's backends line, check_ms, model_ms and context_ms of its
// model line.
type phaseLog struct {
	mu   sync.Mutex
	vals map[string]float64
}

func (l *phaseLog) set(k string, v float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vals[k] = v
}

func (l *phaseLog) get(k string) (float64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.vals[k]
	return v, ok
}

func (l *phaseLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *phaseLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *phaseLog) WithGroup(string) slog.Handler            { return l }

func (l *phaseLog) Handle(_ context.Context, r slog.Record) error {
	backends := strings.Contains(r.Message, "ggml backends loaded")
	var walk func(a slog.Attr)
	walk = func(a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				walk(g)
			}
			return
		}
		key := a.Key
		if backends && key == "ms" {
			key = "backends_ms"
		}
		switch key {
		case "load_ms", "init_ms", "backends_ms", "check_ms", "model_ms", "context_ms":
			// The daemon side logs a runner's numbers as json.Number.
			if f, err := strconv.ParseFloat(v.String(), 64); err == nil {
				l.set(key, f)
			}
		}
	}
	r.Attrs(func(a slog.Attr) bool { walk(a); return true })
	return nil
}
