package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/modeld/modeld/backends/onnx"
)

// Side names, as the result and the summary use them.
const (
	sidePeer     = "transformers.js"
	sideRaw      = "onnxruntime"
	sidePipeline = "pipeline"
	sideHTTP     = "http"
)

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
	HTTPFirstMs    float64 `json:"http_first_ms"`
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

func runBench(args []string, w io.Writer) (err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	model := fs.String("model", "", "model folder (transformers.js layout)")
	lib := fs.String("lib", "", "ONNX Runtime shared library (…/libonnxruntime.so.1)")
	textsPath := fs.String("texts", "", "JSON array of texts")
	node := fs.String("node", "node", "node executable")
	peerScript := fs.String("peer", "", "peer.mjs")
	var hp httpParams
	fs.StringVar(&hp.url, "url", "", "modeld's base URL")
	fs.StringVar(&hp.name, "name", "bench/embed", "model id in modeld")
	fs.StringVar(&hp.format, "format", "float", "encoding_format of the HTTP requests: float or base64")
	threads := fs.Int("threads", 2, "ONNX Runtime intra-op threads of the peer and the in-process sides")
	calls := fs.Int("calls", 8, "calls per run (per caller when concurrent)")
	reps := fs.Int("reps", 10, "reps; each runs every side once per mode, in a rotating order")
	batch := fs.Int("batch", 32, "texts per batch call")
	concurrency := fs.Int("concurrency", 32, "callers of the concurrent runs")
	batchWait := fs.Duration("batch-wait", 2*time.Millisecond, "the in-process pipeline's batching window (modeld serve's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *lib == "" || *textsPath == "" || *peerScript == "" || hp.url == "" {
		return errors.New("bench: -model, -lib, -texts, -peer and -url are required")
	}
	texts, err := readTexts(*textsPath)
	if err != nil {
		return err
	}
	wl := workload{texts: texts, batch: *batch, concurrency: *concurrency, calls: *calls}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	rt, err := onnx.Init(*lib)
	if err != nil {
		return err
	}
	res := benchResult{
		Threads: *threads, Batch: *batch, Concurrency: *concurrency, Calls: *calls, Reps: *reps,
		ORT: rt.Version(), Format: hp.format,
		Rates: map[string]map[string][]float64{modeBatch: {}, modeConcurrent: {}},
		First: map[string][]float64{},
	}
	log.Info("loading the peer (transformers.js)")
	peer, err := startPeer(*node, *peerScript, *model, *textsPath, *threads, wl)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, peer.close()) }()
	res.TransformersJS, res.PeerThreads = peer.info.Version, peer.info.Threads
	log.Info("loading the in-process pipeline and the bare session")
	pipe, err := newPipelineSide(ctx, rt, *model, *threads, *batchWait, wl)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pipe.close()) }()
	res.TokensPerText = pipe.tokensPerText
	raw, err := newRawSide(ctx, rt, *model, *threads, wl)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, raw.close()) }()
	log.Info("loading the model in modeld", "url", hp.url)
	web, err := newHTTPSide(ctx, hp, wl)
	if err != nil {
		return err
	}
	res.Device, res.HTTPFirstMs = web.device, web.firstMs

	sides := []side{
		{sidePeer, peer.batch, peer.concurrent, peer.first},
		{sideRaw, raw.batch, nil, nil},
		{sidePipeline, pipe.batch, pipe.concurrent, pipe.first},
		{sideHTTP, web.batch, web.concurrent, web.first},
	}
	for _, s := range sides {
		if s.first == nil {
			continue
		}
		if res.First[s.name], err = s.first(ctx); err != nil {
			return err
		}
	}
	for rep := range *reps {
		load := loadAverage()
		res.Loads = append(res.Loads, load)
		for _, mode := range []string{modeBatch, modeConcurrent} {
			for _, s := range rotate(sides, rep) {
				f := s.batch
				if mode == modeConcurrent {
					f = s.concurrent
				}
				if f == nil {
					continue
				}
				r, err := f(ctx)
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.name, mode, err)
				}
				res.Rates[mode][s.name] = append(res.Rates[mode][s.name], r)
			}
		}
		log.Info("rep done", "rep", rep+1, "of", *reps, "load", load, "batch", lastRates(res.Rates[modeBatch]), "concurrent", lastRates(res.Rates[modeConcurrent]))
	}
	return writeJSON(w, res)
}

// rotate returns sides starting at index k (mod len), so that no side always
// runs first or right after another one.
func rotate(sides []side, k int) []side {
	k %= len(sides)
	return append(append([]side{}, sides[k:]...), sides[:k]...)
}

// lastRates formats each side's latest rate, for the progress log.
func lastRates(m map[string][]float64) string {
	var parts []string
	for _, name := range []string{sidePeer, sideRaw, sidePipeline, sideHTTP} {
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
