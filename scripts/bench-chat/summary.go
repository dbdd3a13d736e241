package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modeld/modeld/internal/perfdoc"
)

// Targets of the chat benchmark (issue "Chat through llama.cpp").
const (
	targetDecodeRatio = 0.95
	targetAggRatio    = 2.0
)

// sectionHeading is the part of docs/PERFORMANCE.md this benchmark owns.
const sectionHeading = "## Chat (llama.cpp)"

type peerResult struct {
	Threads      int       `json:"threads"`
	Context      int       `json:"context"`
	PromptTokens int       `json:"promptTokens"`
	Tokens       int       `json:"tokens"`
	Decode       []float64 `json:"decode"`
	TTFTMs       []float64 `json:"ttftMs"`
	IDs          []int32   `json:"ids"`
	Text         string    `json:"text"`
}

// pooled holds every round's runs of one kind, concatenated.
type pooled struct {
	peerDecode, peerTTFT                   []float64
	directDecode, directTTFT, directAgg    []float64
	engineDecode, engineTTFT, engineAgg    []float64
	runnerDecode, runnerTTFT, runnerAgg    []float64
	httpDecode, httpTTFT, httpAgg          []float64
	httpGapP50, httpGapP99                 []float64
	peer                                   peerResult
	engine                                 engineResult
	http                                   httpResult
	idsMatch, textMatch, promptTokensMatch bool
	reuseDiffers, reuseRuns, reuseCached   int
	engineReuseDiffers                     int
	roundPeer, roundHTTP                   []float64
	rounds                                 int
	hasRunner                              bool
}

func runSummary(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	var peers, engines, https, loads listFlag
	fs.Var(&peers, "peer", "peer.mjs output (repeat per round)")
	fs.Var(&engines, "engine", "bench-chat engine output (repeat per round)")
	fs.Var(&https, "http", "bench-chat http output (repeat per round)")
	fs.Var(&loads, "load", "load average noted during the run (repeat)")
	doc := fs.String("doc", "", "update the chat section of this Markdown file")
	command := fs.String("command", "scripts/bench-chat/run", "the reproducing command, for the doc")
	machine := fs.String("machine", "", "one line describing the machine, for the doc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(peers) == 0 || len(engines) == 0 || len(https) == 0 {
		return errors.New("summary: need at least one -peer, -engine and -http file")
	}
	var p pooled
	if err := p.load(peers, engines, https); err != nil {
		return err
	}
	body := p.markdown(*command, *machine, loads)
	fmt.Fprintln(w, body)
	if *doc == "" {
		return nil
	}
	old, err := os.ReadFile(*doc)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(*doc, []byte(perfdoc.UpdateSection(string(old), sectionHeading, body)), 0o644)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (p *pooled) load(peers, engines, https []string) error {
	p.rounds = len(https)
	p.idsMatch, p.textMatch, p.promptTokensMatch = true, true, true
	for _, f := range peers {
		var r peerResult
		if err := readJSON(f, &r); err != nil {
			return err
		}
		p.peerDecode = append(p.peerDecode, r.Decode...)
		p.peerTTFT = append(p.peerTTFT, r.TTFTMs...)
		p.roundPeer = append(p.roundPeer, median(r.Decode))
		p.peer = r
	}
	for _, f := range engines {
		var r engineResult
		if err := readJSON(f, &r); err != nil {
			return err
		}
		p.directDecode = append(p.directDecode, r.Direct.Decode...)
		p.directTTFT = append(p.directTTFT, r.Direct.TTFTMs...)
		p.directAgg = append(p.directAgg, r.Direct.Aggregate...)
		p.engineDecode = append(p.engineDecode, r.Engine.Decode...)
		p.engineTTFT = append(p.engineTTFT, r.Engine.TTFTMs...)
		p.engineAgg = append(p.engineAgg, r.Engine.Aggregate...)
		if r.Runner != nil {
			p.hasRunner = true
			p.runnerDecode = append(p.runnerDecode, r.Runner.Decode...)
			p.runnerTTFT = append(p.runnerTTFT, r.Runner.TTFTMs...)
			p.runnerAgg = append(p.runnerAgg, r.Runner.Aggregate...)
		}
		if !slices.Equal(r.Engine.IDs, p.peer.IDs) {
			p.idsMatch = false
		}
		p.promptTokensMatch = p.promptTokensMatch && r.Engine.PromptTokens == p.peer.PromptTokens
		p.engineReuseDiffers += r.Engine.ReuseDiffers
		p.engine = r
	}
	for _, f := range https {
		var r httpResult
		if err := readJSON(f, &r); err != nil {
			return err
		}
		p.httpDecode = append(p.httpDecode, r.Decode...)
		p.httpTTFT = append(p.httpTTFT, r.TTFTMs...)
		p.roundHTTP = append(p.roundHTTP, median(r.Decode))
		p.httpAgg = append(p.httpAgg, r.Aggregate...)
		p.httpGapP50 = append(p.httpGapP50, r.GapP50Ms)
		p.httpGapP99 = append(p.httpGapP99, r.GapP99Ms)
		p.textMatch = p.textMatch && r.Text == p.peer.Text && r.FirstCachedTokens <= 1
		p.reuseDiffers += r.ReuseDiffers
		p.reuseRuns += max(0, len(r.Decode)-1)
		p.reuseCached = r.ReuseCachedTokens
		p.promptTokensMatch = p.promptTokensMatch && r.PromptTokens == p.peer.PromptTokens
		p.http = r
	}
	return nil
}

// markdown renders the chat section: settings, the table of every layer,
// the three ratios against their targets, and the noise seen.
func (p *pooled) markdown(command, machine string, loads []string) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	hd := median(p.httpDecode)
	decodeRatio := hd / median(p.peerDecode)
	aggRatio := median(p.httpAgg) / hd
	overhead := median(p.httpTTFT) - median(p.directTTFT)

	line("%s", sectionHeading)
	line("")
	line("Greedy decoding of the generated benchmark model (`go run ./scripts/gen-gguf -size bench`:")
	line("llama architecture, F16, %d-token SPM vocabulary) through modeld's OpenAI streaming", 2048)
	line("endpoint, against node-llama-cpp 3.21.1 on the same file and the same llama.cpp build")
	line("(both load `libllama.v0.4.0.so` and the `libggml-cpu-*` variants of `@node-llama-cpp/linux-x64@3.21.1`).")
	line("")
	line("Reproduce: `%s --doc` (5–10 min; it waits for quiet CPUs before each round; `ROUNDS`, `RUNS`,", command)
	line("`TOKENS`, `THREADS`, `BATCH_THREADS`, `CTX` are read from the environment).")
	line("")
	line("Settings: %d thread(s) for one-token steps and %d for bigger ones (prompt chunks, several streams:",
		p.engine.Threads, p.engine.BatchThreads)
	line("modeld's default for this machine) in modeld and in the direct calls; %d thread(s) for everything in",
		p.peer.Threads)
	line("node-llama-cpp; context %d per sequence, %d prompt tokens, %d generated tokens per run;",
		p.engine.Context, p.peer.PromptTokens, p.engine.Tokens)
	line("%d rounds (peer, engine, HTTP in turn) of %d runs each; every figure is the median of all runs.",
		p.rounds, len(p.peer.Decode))
	if machine != "" {
		line("Machine: %s.", machine)
	}
	line("")
	line("| path | decode tok/s (min–max) | time to first token ms | %d streams tok/s |", p.engine.Streams)
	line("|---|---|---|---|")
	row := func(name string, dec, ttft, agg []float64) {
		a := "–"
		if len(agg) > 0 {
			a = fmt.Sprintf("%.0f", median(agg))
		}
		line("| %s | %.0f (%.0f–%.0f) | %.1f | %s |", name, median(dec), slices.Min(dec), slices.Max(dec), median(ttft), a)
	}
	row("node-llama-cpp 3.21.1 (`seq.evaluate`)", p.peerDecode, p.peerTTFT, nil)
	row("llama.cpp via yzma, nothing between", p.directDecode, p.directTTFT, p.directAgg)
	row("modeld engine in-process (backends/llama)", p.engineDecode, p.engineTTFT, p.engineAgg)
	if p.hasRunner {
		row("modeld engine in a runner process", p.runnerDecode, p.runnerTTFT, p.runnerAgg)
	}
	row("**modeld HTTP** (`/v1/completions`, SSE)", p.httpDecode, p.httpTTFT, p.httpAgg)
	line("")
	line("| ratio | measured | target |")
	line("|---|---|---|")
	line("| modeld HTTP decode ÷ node-llama-cpp decode | **%.2f** %s | ≥ %.2f |", decodeRatio, mark(decodeRatio >= targetDecodeRatio), targetDecodeRatio)
	line("| modeld HTTP %d streams ÷ 1 stream | **%.2f×** %s | ≥ %.0f× |", p.engine.Streams, aggRatio, mark(aggRatio >= targetAggRatio), targetAggRatio)
	line("| time to first token, HTTP − direct library call | **%.1f ms** | (report) |", overhead)
	line("| _for reference:_ llama.cpp itself, %d sequences per decode ÷ 1 | %.2f× | |", p.engine.Streams, median(p.directAgg)/median(p.directDecode))
	line("")
	line("Time to first token is measured on a different prompt each run (the same first word")
	line("would let modeld reuse the previous prompt's KV); it includes tokenization. Of the HTTP overhead,")
	if p.hasRunner {
		line("the engine's scheduler adds %.1f ms, the runner process %.1f ms, the daemon and HTTP %.1f ms.",
			median(p.engineTTFT)-median(p.directTTFT), median(p.runnerTTFT)-median(p.engineTTFT), median(p.httpTTFT)-median(p.runnerTTFT))
	} else {
		line("the engine's scheduler adds %.1f ms, the runner process, daemon and HTTP %.1f ms.",
			median(p.engineTTFT)-median(p.directTTFT), median(p.httpTTFT)-median(p.engineTTFT))
	}
	if len(p.roundPeer) == len(p.roundHTTP) && len(p.roundHTTP) > 1 {
		var rs []string
		for i := range p.roundHTTP {
			rs = append(rs, fmt.Sprintf("%.2f", p.roundHTTP[i]/p.roundPeer[i]))
		}
		line("The decode ratio of each round alone: %s.", strings.Join(rs, ", "))
	}
	line("HTTP inter-chunk gap: median %.2f ms, p99 %.2f ms.", median(p.httpGapP50), median(p.httpGapP99))
	line("Checks: greedy ids of the engine equal node-llama-cpp's: %s; streamed text equals node-llama-cpp's: %s;",
		yesNo(p.idsMatch), yesNo(p.textMatch))
	line("prompt token counts agree: %s. Decode runs that reused the previous run's prompt KV (%d of %d",
		yesNo(p.promptTokensMatch), p.reuseCached, p.peer.PromptTokens)
	line("prompt tokens cached) and streamed a different text than the run without reuse: %d of %d over HTTP,", p.reuseDiffers, p.reuseRuns)
	line("%d of %d in the in-process engine.", p.engineReuseDiffers, p.reuseRuns)
	if aggRatio < targetAggRatio {
		p.aggregateFindings(line)
	}
	if len(loads) > 0 {
		line("")
		line("Noise: this machine is shared (other builds and tests run beside the benchmark).")
		line("Before each round, CPU time used by other processes over 2 s and the load average (1, 5, 15 min):")
		line("%s. The spread of single runs is in the table.", strings.Join(loads, "; "))
	}
	line("")
	line("_Measured %s._", time.Now().UTC().Format("2006-01-02"))
	return b.String()
}

// aggregateFindings explains, with this run's numbers, where the
// concurrent-stream target is lost: the library's own scaling, and what
// each layer above it keeps of the in-process engine's aggregate.
func (p *pooled) aggregateFindings(line func(string, ...any)) {
	lib := median(p.directAgg) / median(p.directDecode)
	eng := median(p.engineAgg)
	line("")
	line("Why the %d-stream target is not met here: llama.cpp itself decodes %d sequences per step only",
		p.engine.Streams, p.engine.Streams)
	line("%.2f× as fast as one on this machine (a step of %d tokens costs %.1f× a step of one), so ≥ %.0f× is",
		lib, p.engine.Streams, float64(p.engine.Streams)/lib, targetAggRatio)
	line("above what the library gives for this model on %d CPUs. Above the library, the engine in-process",
		runtime.NumCPU())
	if p.hasRunner {
		line("reaches %.0f tok/s with %d streams, the runner process %.0f (%.0f%%), HTTP %.0f (%.0f%%): with %d",
			eng, p.engine.Streams, median(p.runnerAgg), 100*median(p.runnerAgg)/eng, median(p.httpAgg),
			100*median(p.httpAgg)/eng, p.engine.BatchThreads)
	} else {
		line("reaches %.0f tok/s with %d streams, HTTP %.0f (%.0f%%): with %d",
			eng, p.engine.Streams, median(p.httpAgg), 100*median(p.httpAgg)/eng, p.engine.BatchThreads)
	}
	line("ggml threads on as many CPUs, every token event that the runner, the daemon and the client")
	line("handle takes a CPU from a ggml worker while the other one waits at ggml's barrier.")
}

func mark(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(**not met**)"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
