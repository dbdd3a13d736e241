package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modeld/modeld/internal/perfdoc"
)

const sectionHeading = "## Task pipelines (ONNX Runtime)"

// Targets of the benchmark (issue: task pipelines through ONNX Runtime).
const (
	targetPeerRatio   = 1.3 // modeld HTTP ÷ transformers.js
	targetDirectRatio = 0.9 // modeld HTTP ÷ the direct library call, and ÷ the in-process pipeline
	// maxVectorDiff is how far the vectors of texts[0] may differ between sides.
	maxVectorDiff = 1e-4
)

// modelInfo is what the summary reads from the model's config.json.
type modelInfo struct {
	Layers int `json:"num_hidden_layers"`
	Hidden int `json:"hidden_size"`
	Heads  int `json:"num_attention_heads"`
	FFN    int `json:"intermediate_size"`
	Vocab  int `json:"vocab_size"`
	bytes  int64
}

func runSummary(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	resultPath := fs.String("result", "", "bench-pipelines bench output")
	model := fs.String("model", "", "the benchmark model folder (its config.json describes it in the doc)")
	doc := fs.String("doc", "", "update the task pipelines section of this Markdown file")
	command := fs.String("command", "scripts/bench-pipelines/run", "the reproducing command, for the doc")
	machine := fs.String("machine", "", "one line describing the machine, for the doc")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *resultPath == "" {
		return errors.New("summary: -result is required")
	}
	var res benchResult
	if err := readJSON(*resultPath, &res); err != nil {
		return err
	}
	var info modelInfo
	if *model != "" {
		if err := readJSON(filepath.Join(*model, "config.json"), &info); err != nil {
			return err
		}
		st, err := os.Stat(filepath.Join(*model, "onnx", "model.onnx"))
		if err != nil {
			return err
		}
		info.bytes = st.Size()
	}
	body, err := markdown(res, *command, *machine, info)
	if err != nil {
		return err
	}
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

// pairedRatio is the median over reps of a[i] / b[i]: runs of one rep are close
// in time, so the ratio of a pair is less exposed to the machine's changing load
// than a ratio of medians.
func pairedRatio(a, b []float64) float64 {
	n := min(len(a), len(b))
	rs := make([]float64, 0, n)
	for i := range n {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	return median(rs)
}

// verdict is one ratio, a ÷ b, against its target.
type verdict struct {
	what   string
	a, b   []float64
	target float64 // 0: reported, no target
}

// ratio is the median of the per-rep ratios.
func (v verdict) ratio() float64 { return pairedRatio(v.a, v.b) }

// best is the ratio of the best runs: on a shared machine, the runs least
// disturbed by other work.
func (v verdict) best() float64 { return slices.Max(v.a) / slices.Max(v.b) }

// verdicts are the benchmark's ratios; the error says which side is missing.
func verdicts(res benchResult) ([]verdict, error) {
	b, c := res.Rates[modeBatch], res.Rates[modeConcurrent]
	for _, need := range []struct {
		m    map[string][]float64
		mode string
		side string
	}{{b, modeBatch, sidePeer}, {b, modeBatch, sideRaw}, {b, modeBatch, sidePipeline}, {b, modeBatch, sideHTTP},
		{c, modeConcurrent, sidePeer}, {c, modeConcurrent, sidePipeline}, {c, modeConcurrent, sideHTTP}} {
		if len(need.m[need.side]) == 0 {
			return nil, fmt.Errorf("summary: no %s runs of %s", need.mode, need.side)
		}
	}
	vs := []verdict{
		{fmt.Sprintf("modeld HTTP ÷ transformers.js, batch of %d", res.Batch), b[sideHTTP], b[sidePeer], targetPeerRatio},
		{fmt.Sprintf("modeld HTTP ÷ transformers.js, %d concurrent singles", res.Concurrency), c[sideHTTP], c[sidePeer], targetPeerRatio},
		{fmt.Sprintf("modeld HTTP ÷ ONNX Runtime alone (one padded batch of %d)", res.Batch), b[sideHTTP], b[sideRaw], targetDirectRatio},
		{fmt.Sprintf("modeld HTTP %d concurrent singles ÷ ONNX Runtime alone (one padded batch of %d)", res.Concurrency, res.Batch), c[sideHTTP], b[sideRaw], targetDirectRatio},
		{fmt.Sprintf("modeld HTTP ÷ in-process Embed, batch of %d", res.Batch), b[sideHTTP], b[sidePipeline], targetDirectRatio},
		{fmt.Sprintf("modeld HTTP ÷ in-process Embed, %d concurrent singles", res.Concurrency), c[sideHTTP], c[sidePipeline], targetDirectRatio},
		{fmt.Sprintf("modeld HTTP %d concurrent singles ÷ in-process Embed of %d", res.Concurrency, res.Batch), c[sideHTTP], b[sidePipeline], 0},
		{fmt.Sprintf("in-process Embed ÷ ONNX Runtime alone, batch of %d", res.Batch), b[sidePipeline], b[sideRaw], 0},
	}
	if len(b[sideOneLane]) > 0 {
		vs = append(vs,
			verdict{fmt.Sprintf("in-process Embed, %d lanes ÷ 1 lane, batch of %d", res.Lanes, res.Batch), b[sidePipeline], b[sideOneLane], 0},
			verdict{fmt.Sprintf("in-process Embed, %d lanes ÷ 1 lane, %d concurrent singles", res.Lanes, res.Concurrency), c[sidePipeline], c[sideOneLane], 0})
	}
	if len(b[sideSorted]) > 0 {
		vs = append(vs, verdict{fmt.Sprintf("ONNX Runtime alone, length-sorted sub-batches of %d ÷ one padded batch of %d", res.SortedChunk, res.Batch), b[sideSorted], b[sideRaw], 0})
	}
	if len(b[sideRawLanes]) > 0 && len(b[sideSorted]) > 0 {
		vs = append(vs, verdict{fmt.Sprintf("ONNX Runtime alone, sub-batches of %d: %d single-thread runs at once ÷ in turn on %d threads", res.SortedChunk, res.Lanes, res.Threads), b[sideRawLanes], b[sideSorted], 0})
	}
	return vs, nil
}

// markdown renders the section: settings, the table of every side, the ratios
// against their targets, the checks and the noise seen.
func markdown(res benchResult, command, machine string, info modelInfo) (string, error) {
	vs, err := verdicts(res)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }

	line("%s", sectionHeading)
	line("")
	line("Embeddings per second of one feature-extraction model (mean pooling, L2-normalized) through")
	line("modeld's `POST /v1/embeddings`, against transformers.js %s (`pipeline('feature-extraction')`", res.TransformersJS)
	line("in node) on the same files, the same ONNX Runtime %s library (the CPU build shipped in", res.ORT)
	line("`onnxruntime-node@1.30.0`, byte-identical for both) and the same intra-op threads; and against")
	line("modeld's pipeline called in-process and ONNX Runtime alone, the limits for the daemon.")
	line("")
	if info.Layers > 0 {
		line("Model: made by `scripts/bench-pipelines/gen.py` (random weights, the graph of `scripts/gen-onnx`):")
		line("BERT, %d layers, hidden %d, %d heads, FFN %d, the bert-base-uncased WordPiece vocabulary",
			info.Layers, info.Hidden, info.Heads, info.FFN)
		line("(%d tokens), %.0f MB of ONNX. Texts: `scripts/bench-pipelines/texts.json`, 64 sentences and",
			info.Vocab, float64(info.bytes)/1e6)
		line("queries, %.1f tokens each on average.", res.TokensPerText)
		line("")
	}
	line("Reproduce: `%s` (`THREADS`, `PRESET`, `CALLS`, `REPS`, `FORMAT` are read from the environment).", command)
	line("")
	line("Settings: %d intra-op threads on every side (modeld serve `--threads %d`, transformers.js",
		res.Threads, res.Threads)
	line("`session_options: {intraOpNumThreads: %d}`); a run is %d calls of %d texts, or %d callers making %d",
		res.PeerThreads, res.Calls, res.Batch, res.Concurrency, res.Calls)
	line("single-text calls each at once; HTTP vectors as `encoding_format: %s`, every one decoded by the client", res.Format)
	line("(which scans the response by hand: encoding/json would make the client's decoding the cost measured).")
	line("A %d ms pause before each side lets the previous side's ONNX Runtime threads stop spinning.", settle.Milliseconds())
	line("%d reps, each running every side once per mode in a rotating order; figures are medians of", res.Reps)
	line("the reps in embeddings/s, ratios are medians of the per-rep ratios (\"best runs\": the ratio of each")
	line("side's fastest run, the one least disturbed by other work on this shared machine).")
	if machine != "" {
		line("Machine: %s.", machine)
	}
	line("")
	line("| side | batch of %d (min–max) | %d concurrent singles (min–max) |", res.Batch, res.Concurrency)
	line("|---|---|---|")
	cell := func(mode, name string) string {
		xs := res.Rates[mode][name]
		if len(xs) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f (%.0f–%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
	}
	row := func(label, name string) {
		line("| %s | %s | %s |", label, cell(modeBatch, name), cell(modeConcurrent, name))
	}
	row(fmt.Sprintf("transformers.js %s in node", res.TransformersJS), sidePeer)
	row(fmt.Sprintf("ONNX Runtime alone (`onnx.Session.Run`, pre-tokenized), one padded batch on %d threads", res.Threads), sideRaw)
	if len(res.Rates[modeBatch][sideSorted]) > 0 {
		row(fmt.Sprintf("ONNX Runtime alone, length-sorted sub-batches of %d in turn", res.SortedChunk), sideSorted)
	}
	if len(res.Rates[modeBatch][sideRawLanes]) > 0 {
		row(fmt.Sprintf("ONNX Runtime alone, the same sub-batches of %d, %d at once on single-thread runs", res.SortedChunk, res.Lanes), sideRawLanes)
	}
	row(fmt.Sprintf("modeld pipeline in-process (`pipelines.Embedder.Embed`, %d lanes, %g ms batching window)", res.Lanes, res.BatchWaitMs), sidePipeline)
	if len(res.Rates[modeBatch][sideOneLane]) > 0 {
		row("modeld pipeline in-process, `--pipeline-lanes 1` (one session on all threads)", sideOneLane)
	}
	row("**modeld HTTP** (`POST /v1/embeddings`)", sideHTTP)
	line("")
	line("| ratio | measured | best runs | target |")
	line("|---|---|---|---|")
	for _, v := range vs {
		if v.target == 0 {
			line("| %s | %.2f× | %.2f× | (report) |", v.what, v.ratio(), v.best())
			continue
		}
		line("| %s | **%.2f×** %s | %.2f× | ≥ %.1f× |", v.what, v.ratio(), mark(v.ratio() >= v.target), v.best(), v.target)
	}
	line("")
	for _, l := range whereTimeGoes(res) {
		line("%s", l)
	}
	line("")
	peer := res.First[sidePeer]
	dp, dh := maxAbsDiff(res.First[sidePipeline], peer), maxAbsDiff(res.First[sideHTTP], peer)
	line("Checks: the first text's vector equals transformers.js's within %.0e: in-process %s (max |Δ| %.1e),",
		maxVectorDiff, yesNo(dp <= maxVectorDiff), dp)
	line("HTTP %s (max |Δ| %.1e); modeld ran the model on `%s`; same threads on every side: %s.",
		yesNo(dh <= maxVectorDiff), dh, res.Device, yesNo(res.PeerThreads == res.Threads))
	if len(res.Loads) > 0 {
		line("")
		line("Noise: this machine is shared (other builds and tests run beside the benchmark). Load average")
		line("(1, 5, 15 min) at the start of each rep: %s.", strings.Join(res.Loads, "; "))
	}
	line("")
	line("_Measured %s._", time.Now().UTC().Format("2006-01-02"))
	return b.String(), nil
}

// whereTimeGoes explains the batch figures with the limits measured beside
// them: what padding, the run schedule and HTTP cost.
func whereTimeGoes(res benchResult) []string {
	b, c := res.Rates[modeBatch], res.Rates[modeConcurrent]
	pct := func(x float64) float64 { return 100 * x }
	peerOfRaw := pairedRatio(b[sidePeer], b[sideRaw])
	out := []string{
		fmt.Sprintf("Where the time goes, batch of %d: ONNX Runtime's forward passes are nearly all of it on every side.", res.Batch),
		fmt.Sprintf("transformers.js runs at %.0f%% of ONNX Runtime alone on one padded batch, the way it calls it.", pct(peerOfRaw)),
	}
	if padded, sorted := res.PaddedTokens[sideRaw], res.PaddedTokens[sideSorted]; padded > 0 && sorted > 0 {
		out = append(out,
			fmt.Sprintf("modeld does less work: a run's %d real tokens are %d padded ones in batches of %d, and %d when sorted",
				res.RunTokens, padded, res.Batch, sorted),
			fmt.Sprintf("by length and cut into sub-batches of %d (ONNX Runtime alone runs that %.2f× faster); the pipeline",
				res.SortedChunk, pairedRatio(b[sideSorted], b[sideRaw])),
			"cuts each merged batch where the padding saved outweighs the cost of one more run (an exact search).")
	}
	if len(b[sideRawLanes]) > 0 && len(b[sideOneLane]) > 0 {
		out = append(out,
			fmt.Sprintf("It also runs those pieces %d at once, each on %s of a second session, instead of one after", res.Lanes, plural(max(res.Threads/res.Lanes, 1), "thread")),
			fmt.Sprintf("another on all %d: ONNX Runtime's per-operator fork and join cost more than they give on small", res.Threads),
			fmt.Sprintf("matrices (ONNX Runtime alone on the sorted sub-batches, %d at once: %.2f× the same in turn; the pipeline with",
				res.Lanes, pairedRatio(b[sideRawLanes], b[sideSorted])),
			fmt.Sprintf("%d lanes: %.2f× itself with one).", res.Lanes, pairedRatio(b[sidePipeline], b[sideOneLane])))
	}
	out = append(out,
		fmt.Sprintf("HTTP keeps %.0f%% of the in-process rate (request and response JSON, vectors as `%s`).",
			pct(pairedRatio(b[sideHTTP], b[sidePipeline])), res.Format),
		fmt.Sprintf("With %d concurrent singles transformers.js runs %d batches of one (no padding) one after another, at",
			res.Concurrency, res.Concurrency),
		fmt.Sprintf("%.0f%% of its batch rate; modeld merges them (its window waits while callers keep arriving) and keeps",
			pct(pairedRatio(c[sidePeer], b[sidePeer]))),
		fmt.Sprintf("%.0f%% of its batch rate over HTTP, where each caller's next request comes only after the last answer.",
			pct(pairedRatio(c[sideHTTP], b[sideHTTP]))))
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
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
