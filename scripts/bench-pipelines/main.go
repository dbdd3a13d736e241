// Command bench-pipelines is the Go half of scripts/bench-pipelines/run, the
// embeddings benchmark of modeld against transformers.js. It has two
// subcommands:
//
//	bench-pipelines bench -model DIR -lib libonnxruntime.so.1 -texts F \
//	        -peer peer.mjs -url http://127.0.0.1:PORT [-name bench/embed] ...
//	    loads the sides, all on the same model: transformers.js in a node child
//	    process (peer.mjs); ONNX Runtime alone (onnx.Session.Run on pre-tokenized
//	    batches: one padded batch, and length-sorted sub-batches); modeld's
//	    pipeline in this process (pipelines.Embedder.Embed with serve's batching
//	    window, without it, and without it on length-sorted calls); and modeld
//	    serve through /v1/embeddings. Then, -reps times, runs every side once
//	    with 32 texts per call and once with 32 concurrent single-text callers,
//	    in a rotating order so that the load of this shared machine falls on
//	    every side alike. Prints every run as one JSON document.
//	bench-pipelines summary -result R.json [-model DIR] [-doc FILE]
//	    medians, the ratios against the targets (medians of per-rep ratios) and
//	    the Markdown section of docs/PERFORMANCE.md
//
// A run is -calls calls (per caller, for the concurrent mode); its rate is the
// embeddings it returned divided by its wall time. Every side warms up first.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-pipelines bench|summary [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "bench":
		err = runBench(os.Args[2:], os.Stdout)
	case "summary":
		err = runSummary(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q (want bench or summary)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-pipelines:", err)
		os.Exit(1)
	}
}

// workload is what every side runs: the texts, batches of batch texts, and
// concurrency callers of one text each.
type workload struct {
	texts       []string
	batch       int
	concurrency int
	calls       int
}

// batchTexts is call i's batch: a window over the texts, so that calls differ
// (peer.mjs takes the same windows).
func (w workload) batchTexts(i int) []string {
	out := make([]string, w.batch)
	for j := range out {
		out[j] = w.texts[(i*w.batch+j)%len(w.texts)]
	}
	return out
}

// singleText is caller c's text of its call i (peer.mjs takes the same).
func (w workload) singleText(c, i int) string {
	return w.texts[(c+i*w.concurrency)%len(w.texts)]
}

func readTexts(path string) ([]string, error) {
	var texts []string
	if err := readJSON(path, &texts); err != nil {
		return nil, err
	}
	if len(texts) == 0 || slices.Contains(texts, "") {
		return nil, fmt.Errorf("%s: want a JSON array of non-empty strings", path)
	}
	return texts, nil
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

func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// rate is n embeddings over d, per second.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// median of xs (the upper one for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// maxAbsDiff is the largest |a[i]-b[i]|, or +Inf when the lengths differ.
func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}
