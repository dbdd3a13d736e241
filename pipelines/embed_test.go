package pipelines

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modeld/modeld/pipelines/tokenizer"
)

type embedGolden struct {
	Version string   `json:"transformers_js"`
	Texts   []string `json:"texts"`
	Cases   []struct {
		Model     string      `json:"model"`
		Pooling   string      `json:"pooling"`
		Normalize bool        `json:"normalize"`
		Vectors   [][]float64 `json:"vectors"`
		InputIDs  [][]int64   `json:"input_ids"`
	} `json:"cases"`
}

func TestEmbedMatchesTransformersJS(t *testing.T) {
	var g embedGolden
	readGolden(t, "embed.json", &g)
	opts := testOptions(t)
	loaded := map[string]*Embedder{}
	defer func() {
		for _, e := range loaded {
			closeP(t, e)
		}
	}()
	worst := 0.0
	checked := 0
	for _, c := range g.Cases {
		e := loaded[c.Model]
		if e == nil {
			var err error
			if e, err = LoadEmbedder(modelDir(t, c.Model), opts); err != nil {
				t.Fatal(err)
			}
			loaded[c.Model] = e
		}
		if c.InputIDs != nil {
			for i, text := range g.Texts {
				got := e.enc.files.tok.Encode(text, tokenizer.WithTruncation(e.enc.files.maxTokens())).IDs
				if !slices.Equal(got, c.InputIDs[i]) {
					t.Errorf("%s: ids of %q = %v, transformers.js %v", c.Model, text, got, c.InputIDs[i])
				}
			}
			continue
		}
		p, err := ParsePooling(c.Pooling)
		if err != nil {
			t.Fatal(err)
		}
		norm := c.Normalize
		res, err := e.Embed(context.Background(), g.Texts, EmbedOptions{Pooling: p, Normalize: &norm})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range res.Vectors {
			d := maxAbsDiff32(v, c.Vectors[i])
			worst = math.Max(worst, d)
			checked++
			if d > 1e-5 {
				t.Errorf("%s pooling=%s normalize=%v text %d: max abs diff %.3g > 1e-5", c.Model, c.Pooling, c.Normalize, i, d)
			}
		}
		if res.Device != "cpu" {
			t.Errorf("device = %q", res.Device)
		}
	}
	if checked == 0 {
		t.Fatal("no vectors compared")
	}
	t.Logf("embeddings: %d vectors vs transformers.js %s, max abs diff %.3g", checked, g.Version, worst)
}

func TestEmbedDefaultsFromSentenceTransformers(t *testing.T) {
	opts := testOptions(t)
	mean, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, mean)
	if mean.pooling != PoolingMean || !mean.normalize {
		t.Fatalf("embed-mean: pooling %s normalize %v, want mean + normalize (modules.json)", mean.pooling, mean.normalize)
	}
	cls, err := LoadEmbedder(modelDir(t, "embed-cls"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, cls)
	if cls.pooling != PoolingCLS || cls.normalize {
		t.Fatalf("embed-cls: pooling %s normalize %v, want cls without normalize (1_Pooling only)", cls.pooling, cls.normalize)
	}
	res, err := mean.Embed(context.Background(), []string{"hello world"}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := norm(res.Vectors[0]); math.Abs(n-1) > 1e-6 {
		t.Fatalf("default vector norm %v, want 1", n)
	}
	if res.Tokens != 4 || len(res.Vectors[0]) != mean.Dimensions() || mean.Dimensions() != 32 {
		t.Fatalf("tokens %d dims %d/%d", res.Tokens, len(res.Vectors[0]), mean.Dimensions())
	}
}

func TestEmbedDimensions(t *testing.T) {
	e, err := LoadEmbedder(modelDir(t, "embed-cls"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	ctx := context.Background()
	full, err := e.Embed(ctx, []string{"the quick brown fox"}, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := e.Embed(ctx, []string{"the quick brown fox"}, EmbedOptions{Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	v := short.Vectors[0]
	if len(v) != 8 || math.Abs(norm(v)-1) > 1e-6 {
		t.Fatalf("dimensions 8: len %d norm %v", len(v), norm(v))
	}
	want := append([]float32(nil), full.Vectors[0][:8]...)
	l2Normalize(want)
	for i := range v {
		if math.Abs(float64(v[i]-want[i])) > 1e-7 {
			t.Fatalf("truncated vector %v, want %v", v, want)
		}
	}
	for _, d := range []int{-1, 33} {
		if _, err := e.Embed(ctx, []string{"x"}, EmbedOptions{Dimensions: d}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("dimensions %d: %v", d, err)
		}
	}
}

func TestEmbedBadInput(t *testing.T) {
	e, err := LoadEmbedder(modelDir(t, "embed-mean"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	ctx := context.Background()
	for _, texts := range [][]string{nil, {}, {"ok", ""}} {
		if _, err := e.Embed(ctx, texts, EmbedOptions{}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("texts %q: err %v, want ErrInvalidInput", texts, err)
		}
	}
	if _, err := e.Embed(ctx, []string{"x"}, EmbedOptions{Pooling: "max"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown pooling: %v", err)
	}
	// A 100k-character text is truncated to the model's length, not refused.
	long := strings.Repeat("the weather today is sunny and hot. ", 2800)[:100000]
	res, err := e.Embed(ctx, []string{long, long[:2000]}, EmbedOptions{})
	if err != nil {
		t.Fatalf("long text: %v", err)
	}
	if res.Truncated != 2 || res.Tokens != 2*128 {
		t.Fatalf("truncated %d tokens %d, want 2 and 256", res.Truncated, res.Tokens)
	}
	if d := maxDiff(res.Vectors[0], res.Vectors[1]); d != 0 {
		t.Fatalf("truncated texts with the same first 128 tokens differ by %g", d)
	}
}

// TestEmbedConcurrentMatchesSeparate: 32 concurrent single-text requests, merged
// by the batcher into one forward pass, give the vectors of 32 separate requests.
func TestEmbedConcurrentMatchesSeparate(t *testing.T) {
	opts := testOptions(t)
	single, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, single)
	words := strings.Fields("the of and to in is it was for on are with as he be at by this had not but from or have an they which one you were her all")[:32]
	texts := make([]string, 32)
	for i, w := range words {
		texts[i] = w + " the quick brown fox"
	}
	// Every text is 7 tokens; a budget of exactly 32×7 padded tokens holds all 32.
	// The batching loop is held on its first request until all 32 are queued, so
	// that it takes the other 31 at once and runs them as one pass however the
	// callers are scheduled: a loop that finds 8 or more queued runs them without
	// waiting, by design, and the late ones in a pass of their own.
	var queued atomic.Int32
	allQueued := make(chan struct{})
	opts.BatchTokens = 32 * 7
	opts.batchHooks = batcherHooks{
		enqueued: func() {
			if queued.Add(1) == 32 {
				close(allQueued)
			}
		},
		joined: func(n int) {
			if n == 1 {
				<-allQueued
			}
		},
	}
	merged, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, merged)

	ctx := context.Background()
	separate := make([][]float32, len(texts))
	for i, s := range texts {
		r, err := single.Embed(ctx, []string{s}, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Tokens != 7 {
			t.Fatalf("%q has %d tokens, the test needs 7", s, r.Tokens)
		}
		separate[i] = r.Vectors[0]
	}
	concurrent := make([][]float32, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i, s := range texts {
		wg.Go(func() {
			r, err := merged.Embed(ctx, []string{s}, EmbedOptions{})
			if err == nil {
				concurrent[i] = r.Vectors[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := merged.enc.passes.Load(); n != 1 {
		t.Fatalf("32 concurrent requests ran in %d forward passes, want 1", n)
	}
	if n := single.enc.passes.Load(); n != 32 {
		t.Fatalf("32 sequential requests ran in %d forward passes, want 32", n)
	}
	worst := 0.0
	for i := range texts {
		worst = math.Max(worst, maxDiff(separate[i], concurrent[i]))
	}
	if worst > 1e-6 {
		t.Fatalf("concurrent vs separate: max abs diff %g > 1e-6", worst)
	}
	t.Logf("32 concurrent (1 pass) vs 32 separate: max abs diff %.3g", worst)
}

func norm(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestEmbedLargeRequestIsChunked: a request over the token budget runs in
// budget-sized passes and still returns each text's own vector.
func TestEmbedLargeRequestIsChunked(t *testing.T) {
	opts := testOptions(t)
	whole, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, whole)
	opts.BatchTokens = 40
	chunked, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, chunked)
	var texts []string
	for i := range 12 {
		texts = append(texts, strings.Repeat("sunny weather ", i%5+1)+"today")
	}
	ctx := context.Background()
	a, err := whole.Embed(ctx, texts, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := chunked.Embed(ctx, texts, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := chunked.enc.passes.Load(); n < 3 {
		t.Fatalf("%d passes for %d tokens under a 40-token budget", n, b.Tokens)
	}
	for i := range texts {
		if d := maxDiff(a.Vectors[i], b.Vectors[i]); d > 1e-6 {
			t.Fatalf("text %d differs by %g when chunked", i, d)
		}
	}
}

// TestEmbedLanes: with two threads and two lanes a merged batch runs as
// parallel session runs on the second session, and every vector is still
// transformers.js's (and the single session's).
func TestEmbedLanes(t *testing.T) {
	var g embedGolden
	readGolden(t, "embed.json", &g)
	opts := testOptions(t)
	one, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, one)
	if one.enc.lanes != nil {
		t.Fatal("one thread made lanes")
	}
	opts.Threads, opts.Lanes = 2, 2
	two, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, two)
	if two.enc.lanes == nil || two.enc.laneCount != 2 {
		t.Fatalf("Threads 2, Lanes 2: lanes %v, count %d", two.enc.lanes, two.enc.laneCount)
	}
	ctx := context.Background()
	norm := true
	for _, c := range g.Cases {
		if c.Model != "embed-mean" || c.Vectors == nil || c.Pooling != "mean" || c.Normalize != norm {
			continue
		}
		a, err := one.Embed(ctx, g.Texts, EmbedOptions{Pooling: PoolingMean, Normalize: &norm})
		if err != nil {
			t.Fatal(err)
		}
		b, err := two.Embed(ctx, g.Texts, EmbedOptions{Pooling: PoolingMean, Normalize: &norm})
		if err != nil {
			t.Fatal(err)
		}
		for i := range g.Texts {
			if d := maxAbsDiff32(b.Vectors[i], c.Vectors[i]); d > 1e-5 {
				t.Errorf("text %d: lanes vs transformers.js max abs diff %.3g", i, d)
			}
			if d := maxDiff(a.Vectors[i], b.Vectors[i]); d > 1e-6 {
				t.Errorf("text %d: lanes vs one session max abs diff %.3g", i, d)
			}
		}
		if n := two.enc.laneRuns.Load(); n < 2 {
			t.Fatalf("%d texts ran in %d lane runs, want 2 or more", len(g.Texts), n)
		}
		return
	}
	t.Fatal("embed.json has no mean-pooled, normalized embed-mean case")
}

// A failing run on one lane fails the batch and stops the others; nothing hangs.
func TestEmbedLanesError(t *testing.T) {
	opts := testOptions(t)
	opts.Threads, opts.Lanes = 2, 2
	e, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	encs, _, err := e.enc.preprocess(context.Background(), []string{"a", "b c", "d e f", "g h i j", "k l m n o"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := e.enc.runSorted(ctx, encs); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled batch on lanes: %v, want context.Canceled", err)
	}
}

// OnPass hears of every merged pass: requests, sequences, real and padded
// tokens, session runs.
func TestEmbedReportsPasses(t *testing.T) {
	opts := testOptions(t)
	var got []PassStats
	opts.OnPass = func(s PassStats) { got = append(got, s) } // the batching loop calls it, one pass at a time
	e, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	texts := []string{"hi", "the quick brown fox jumps over the lazy dog", "sunny weather today"}
	res, err := e.Embed(context.Background(), texts, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d passes reported, want 1", len(got))
	}
	s := got[0]
	if s.Requests != 1 || s.Sequences != 3 || s.Tokens != res.Tokens || s.Runs < 1 || s.PaddedTokens < s.Tokens || s.Seconds <= 0 {
		t.Fatalf("pass = %+v, want 1 request, 3 sequences, %d tokens, padded >= tokens", s, res.Tokens)
	}
}
