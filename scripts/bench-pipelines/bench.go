package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modeld/modeld/backends/onnx"
	"github.com/modeld/modeld/pipelines"
)

// Side names, as the result and the summary use them.
const (
	sidePeer     = "transformers.js"
	sideRaw      = "onnxruntime"
	sideSorted   = "onnxruntime-sorted"
	sideRawLanes = "onnxruntime-lanes"
	sidePipeline = "pipeline"
	sideOneLane  = "pipeline-onelane"
	sideHTTP     = "http"
)

// settle is the pause before each side's run.
const settle = 150 * time.Millisecond

// Modes.
const (
	modeBatch      = "batch"
	modeConcurrent = "concurrent"
)

// benchResult is what `bench-pipelines bench` prints: every run of every side,
// in rep order, so that runs of one rep can be paired.
type benchResult struct {
	Threads        int     `json:"threads"`
	Batch          int     `json:"batch"`
	Concurrency    int     `json:"concurrency"`
	Calls          int     `json:"calls"`
	Reps           int     `json:"reps"`
	ORT            string  `json:"onnxruntime"`
	TransformersJS string  `json:"transformers_js"`
	PeerThreads    int     `json:"peer_threads"`
	Format         string  `json:"encoding_format"`
	Device         string  `json:"device"`
	TokensPerText  float64 `json:"tokens_per_text"`
	SortedChunk    int     `json:"sorted_chunk"`
	BatchWaitMs    float64 `json:"batch_wait_ms"`
	// Lanes is the in-process pipeline's lanes (pipelines.LaneSplit), and the
	// parallel runs of the onnxruntime-lanes side.
	Lanes int `json:"lanes"`
	// RunTokens is the real tokens of one batch run; PaddedTokens[side] what the
	// bare sessions feed for them, padding included.
	RunTokens    int            `json:"run_tokens"`
	PaddedTokens map[string]int `json:"padded_tokens"`
	HTTPFirstMs  float64        `json:"http_first_ms"`
	// Rates[mode][side] holds one embeddings/s figure per rep.
	Rates map[string]map[string][]float64 `json:"rates"`
	// First[side] is the vector of texts[0].
	First map[string][]float64 `json:"first"`
	// Loads are /proc/loadavg's first three fields at the start of each rep.
	Loads []string `json:"loads"`
}

// side is one way of computing embeddings; concurrent and first may be nil.
type side struct {
	name       string
	batch      func(context.Context) (float64, error)
	concurrent func(context.Context) (float64, error)
	first      func(context.Context) ([]float64, error)
}

// benchConfig is the bench subcommand's flags.
type benchConfig struct {
	model, lib, texts, node, peer string
	http                          httpParams
	threads, reps, sortedChunk    int
	batchWait                     time.Duration
	wl                            workload
}

func parseBenchFlags(args []string) (benchConfig, error) {
	var c benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.model, "model", "", "model folder (transformers.js layout)")
	fs.StringVar(&c.lib, "lib", "", "ONNX Runtime shared library (…/libonnxruntime.so.1)")
	fs.StringVar(&c.texts, "texts", "", "JSON array of texts")
	fs.StringVar(&c.node, "node", "node", "node executable")
	fs.StringVar(&c.peer, "peer", "", "peer.mjs")
	fs.StringVar(&c.http.url, "url", "", "modeld's base URL")
	fs.StringVar(&c.http.name, "name", "bench/embed", "model id in modeld")
	fs.StringVar(&c.http.format, "format", "float", "encoding_format of the HTTP requests: float or base64")
	fs.IntVar(&c.threads, "threads", 2, "ONNX Runtime intra-op threads of the peer and the in-process sides")
	fs.IntVar(&c.wl.calls, "calls", 8, "calls per run (per caller when concurrent)")
	fs.IntVar(&c.reps, "reps", 10, "reps; each runs every side once per mode, in a rotating order")
	fs.IntVar(&c.wl.batch, "batch", 32, "texts per batch call")
	fs.IntVar(&c.wl.concurrency, "concurrency", 32, "callers of the concurrent runs")
	fs.IntVar(&c.sortedChunk, "sorted-chunk", 8, "texts per length-sorted sub-batch of the onnxruntime-sorted side (0: no such side)")
	fs.DurationVar(&c.batchWait, "batch-wait", 2*time.Millisecond, "the in-process pipeline's batching window (modeld serve's default)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.model == "" || c.lib == "" || c.texts == "" || c.peer == "" || c.http.url == "" {
		return c, errors.New("bench: -model, -lib, -texts, -peer and -url are required")
	}
	texts, err := readTexts(c.texts)
	c.wl.texts = texts
	return c, err
}

func runBench(args []string, w io.Writer) (err error) {
	c, err := parseBenchFlags(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rt, err := onnx.Init(c.lib)
	if err != nil {
		return err
	}
	res := benchResult{
		Threads: c.threads, Batch: c.wl.batch, Concurrency: c.wl.concurrency, Calls: c.wl.calls, Reps: c.reps,
		ORT: rt.Version(), Format: c.http.format, SortedChunk: c.sortedChunk, BatchWaitMs: msec(c.batchWait),
		Rates: map[string]map[string][]float64{modeBatch: {}, modeConcurrent: {}},
		First: map[string][]float64{}, PaddedTokens: map[string]int{},
	}
	var set sideSet
	defer func() { err = errors.Join(err, set.close()) }()
	if err := set.load(ctx, c, rt, &res, log); err != nil {
		return err
	}
	for _, s := range set.sides {
		if s.first == nil {
			continue
		}
		if res.First[s.name], err = s.first(ctx); err != nil {
			return err
		}
	}
	for rep := range c.reps {
		load := loadAverage()
		res.Loads = append(res.Loads, load)
		for _, mode := range []string{modeBatch, modeConcurrent} {
			for _, s := range rotate(set.sides, rep) {
				f := s.batch
				if mode == modeConcurrent {
					f = s.concurrent
				}
				if f == nil {
					continue
				}
				// The previous side's ONNX Runtime threads spin for a while after
				// their last run; the next side starts once they have gone idle.
				time.Sleep(settle)
				r, err := f(ctx)
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.name, mode, err)
				}
				res.Rates[mode][s.name] = append(res.Rates[mode][s.name], r)
			}
		}
		log.Info("rep done", "rep", rep+1, "of", c.reps, "load", load,
			"batch", lastRates(res.Rates[modeBatch]), "concurrent", lastRates(res.Rates[modeConcurrent]))
	}
	return writeJSON(w, res)
}

// sideSet holds the loaded sides and closes them.
type sideSet struct {
	sides   []side
	closers []func() error
}

// load starts every side: the peer, the in-process pipeline(s), the bare
// sessions, and the first requests to modeld (which load the model there).
func (set *sideSet) load(ctx context.Context, c benchConfig, rt *onnx.Runtime, res *benchResult, log *slog.Logger) error {
	log.Info("loading the peer (transformers.js)")
	peer, err := startPeer(c.node, c.peer, c.model, c.texts, c.threads, c.wl)
	if err != nil {
		return err
	}
	set.closers = append(set.closers, peer.close)
	set.sides = append(set.sides, side{sidePeer, peer.batch, peer.concurrent, peer.first})
	res.TransformersJS, res.PeerThreads = peer.info.Version, peer.info.Threads

	log.Info("loading the in-process pipelines and the bare sessions")
	raw, err := newRawSide(ctx, rt, c.model, c.threads, 0, 1, c.wl)
	if err != nil {
		return err
	}
	set.closers = append(set.closers, raw.close)
	set.sides = append(set.sides, side{sideRaw, raw.batch, nil, nil})
	res.RunTokens, res.PaddedTokens[sideRaw] = raw.tokens, raw.padded
	if c.sortedChunk > 0 {
		sorted, err := newRawSide(ctx, rt, c.model, c.threads, c.sortedChunk, 1, c.wl)
		if err != nil {
			return err
		}
		set.closers = append(set.closers, sorted.close)
		set.sides = append(set.sides, side{sideSorted, sorted.batch, nil, nil})
		res.PaddedTokens[sideSorted] = sorted.padded
	}
	st, err := os.Stat(filepath.Join(c.model, "onnx", "model.onnx"))
	if err != nil {
		return err
	}
	res.Lanes, _ = pipelines.LaneSplit(c.threads, 0, st.Size())
	if res.Lanes > 1 && c.sortedChunk > 0 {
		// The same sub-batches, res.Lanes at once on single-thread runs.
		lanes, err := newRawSide(ctx, rt, c.model, c.threads, c.sortedChunk, res.Lanes, c.wl)
		if err != nil {
			return err
		}
		set.closers = append(set.closers, lanes.close)
		set.sides = append(set.sides, side{sideRawLanes, lanes.batch, nil, nil})
		res.PaddedTokens[sideRawLanes] = lanes.padded
	}
	pipe, err := newPipelineSide(ctx, rt, c.model, c.threads, 0, c.batchWait, c.wl)
	if err != nil {
		return err
	}
	set.closers = append(set.closers, pipe.close)
	set.sides = append(set.sides, side{sidePipeline, pipe.batch, pipe.concurrent, pipe.first})
	res.TokensPerText = pipe.tokensPerText
	if res.Lanes > 1 {
		one, err := newPipelineSide(ctx, rt, c.model, c.threads, 1, c.batchWait, c.wl)
		if err != nil {
			return err
		}
		set.closers = append(set.closers, one.close)
		set.sides = append(set.sides, side{sideOneLane, one.batch, one.concurrent, nil})
	}

	log.Info("loading the model in modeld", "url", c.http.url)
	web, err := newHTTPSide(ctx, c.http, c.wl)
	if err != nil {
		return err
	}
	set.sides = append(set.sides, side{sideHTTP, web.batch, web.concurrent, web.first})
	res.Device, res.HTTPFirstMs = web.device, web.firstMs
	return nil
}

// close closes the sides in reverse order of loading.
func (set *sideSet) close() error {
	var errs []error
	for i := len(set.closers) - 1; i >= 0; i-- {
		errs = append(errs, set.closers[i]())
	}
	return errors.Join(errs...)
}

func msec(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// rotate returns sides starting at index k (mod len), so that no side always
// runs first or right after another one.
func rotate(sides []side, k int) []side {
	k %= len(sides)
	return append(append([]side{}, sides[k:]...), sides[:k]...)
}

// lastRates formats each side's latest rate, for the progress log.
func lastRates(m map[string][]float64) string {
	var parts []string
	for _, name := range []string{sidePeer, sideRaw, sideSorted, sideRawLanes, sidePipeline, sideOneLane, sideHTTP} {
		if xs := m[name]; len(xs) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", name, xs[len(xs)-1]))
		}
	}
	return strings.Join(parts, " ")
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute load ("?" when unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
