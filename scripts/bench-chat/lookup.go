package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/modeld/modeld/backends/llama"
	engine "github.com/modeld/modeld/backends/llama/engine"
)

// lookupResult is `bench-chat lookup`: modeld's engine in this process with
// prompt lookup off and on, in the same interleaved runs, on a rewrite (a
// request that repeats a long passage of its prompt) and on free text.
type lookupResult struct {
	Model        string           `json:"model"`
	Threads      int              `json:"threads"`
	BatchThreads int              `json:"batch_threads"`
	Tokens       int              `json:"tokens"`
	Runs         int              `json:"runs"`
	Load         string           `json:"load"`
	Workloads    []lookupWorkload `json:"workloads"`
}

type lookupWorkload struct {
	Name         string    `json:"name"`
	PromptTokens int       `json:"prompt_tokens"`
	Plain        []float64 `json:"plain_tok_s"`  // decode tok/s, lookup off, per run
	Lookup       []float64 `json:"lookup_tok_s"` // decode tok/s, lookup on, per run
	Identical    bool      `json:"identical"`    // the greedy tokens of every run were the same
	Drafted      uint64    `json:"drafted"`
	Kept         uint64    `json:"kept"`
}

// runLookup measures prompt lookup on the engine. The rewrite prompt is the
// model's own greedy text: prompt, its continuation, a blank line, and the
// prompt again, so that the model asked to go on writes the passage again
// (the copy a rewrite makes); free text is the prompt alone.
func runLookup(args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF model (required)")
	libRoot := fs.String("lib", "", "runtime-library root with llama/ inside (required)")
	prompt := fs.String("prompt", "Once upon a time", "prompt text")
	threads := fs.Int("threads", 1, "threads of one-token decode steps")
	batchThreads := fs.Int("batch-threads", 0, "threads of bigger steps (0 = the engine's default)")
	ctx := fs.Int("ctx", 1024, "context of one sequence")
	tokens := fs.Int("tokens", 200, "tokens to generate per run")
	runs := fs.Int("runs", 5, "interleaved runs of each side")
	draft := fs.Int("draft", llama.DefaultLookup, "most tokens a step drafts with lookup on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *libRoot == "" {
		return errors.New("lookup: -model and -lib are required")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := engine.Init(filepath.Join(*libRoot, "llama")); err != nil {
		return err
	}
	if *batchThreads == 0 {
		*batchThreads = engine.DefaultBatchThreads()
	}
	o := llama.Options{Slots: 1, Threads: *threads, BatchThreads: *batchThreads, ContextSize: *ctx}
	plain, err := engine.Open(*model, o)
	if err != nil {
		return err
	}
	defer plain.Close()
	o.Lookup = *draft
	spec, err := engine.Open(*model, o)
	if err != nil {
		return err
	}
	defer spec.Close()

	free, err := plain.Tokenize(*prompt, true, false)
	if err != nil {
		return err
	}
	first, err := timedGenerate(plain, free, *tokens)
	if err != nil {
		return err
	}
	// The same request on the other side, so that both sides' slots hold
	// the same KV before the runs (their prefix reuse then matches).
	if _, err := timedGenerate(spec, free, *tokens); err != nil {
		return err
	}
	gap, err := plain.Tokenize("\n\n"+*prompt, false, false)
	if err != nil {
		return err
	}
	rewrite := slices.Concat(free, first.ids, gap)
	load, _ := os.ReadFile("/proc/loadavg")
	res := lookupResult{Model: filepath.Base(*model), Threads: *threads, BatchThreads: *batchThreads,
		Tokens: *tokens, Runs: *runs, Load: string(load[:min(len(load), 14)])}
	for _, w := range []struct {
		name   string
		prompt []int32
	}{{"rewrite", rewrite}, {"free text", free}} {
		lw := lookupWorkload{Name: w.name, PromptTokens: len(w.prompt), Identical: true}
		before := spec.Stats()
		for r := 0; r < *runs; r++ {
			a, err := timedGenerate(plain, w.prompt, *tokens)
			if err != nil {
				return err
			}
			b, err := timedGenerate(spec, w.prompt, *tokens)
			if err != nil {
				return err
			}
			lw.Plain = append(lw.Plain, decodeRate(a.tokens, 0, a.last.Sub(a.first).Seconds()))
			lw.Lookup = append(lw.Lookup, decodeRate(b.tokens, 0, b.last.Sub(b.first).Seconds()))
			lw.Identical = lw.Identical && slices.Equal(a.ids, b.ids)
		}
		after := spec.Stats()
		lw.Drafted, lw.Kept = after.DraftTokens-before.DraftTokens, after.AcceptedTokens-before.AcceptedTokens
		res.Workloads = append(res.Workloads, lw)
	}
	return printJSON(res)
}

// timedGenerate runs one greedy generation of n tokens from prompt ids.
func timedGenerate(m *engine.Model, ids []int32, n int) (streamTiming, error) {
	t := streamTiming{start: time.Now()}
	ch, err := m.Generate(context.Background(), llama.Request{Prompt: ids, MaxTokens: n})
	if err != nil {
		return t, err
	}
	for ev := range ch {
		if ev.Err != nil {
			err = ev.Err
		}
		if ev.Done {
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

// lookupMarkdown is the table of one `bench-chat lookup` result.
func lookupMarkdown(w io.Writer, r lookupResult) {
	fmt.Fprintf(w, "Model %s, %d/%d threads, %d tokens, %d interleaved runs each side, load average %s.\n\n", r.Model, r.Threads, r.BatchThreads, r.Tokens, r.Runs, r.Load)
	fmt.Fprintln(w, "| workload | prompt tokens | plain tok/s | lookup tok/s | lookup ÷ plain | drafted | kept | greedy text identical |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|")
	for _, lw := range r.Workloads {
		p, l := median(lw.Plain), median(lw.Lookup)
		ratio := 0.0
		if p > 0 {
			ratio = l / p
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.2f× | %d | %d | %v |\n", lw.Name, lw.PromptTokens, p, l, ratio, lw.Drafted, lw.Kept, lw.Identical)
	}
}

// runLookupMarkdown prints the table of the `bench-chat lookup` JSON files
// given.
func runLookupMarkdown(args []string) error {
	for _, f := range args {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r lookupResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		lookupMarkdown(os.Stdout, r)
		fmt.Println()
	}
	return nil
}
