package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/modeld/modeld/internal/perfdoc"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modeld/modeld/pipelines/tokenizer"
)

// fakeEmbeddings serves /v1/embeddings as modeld answers it: one vector per
// input whose first value is the input's length, float or base64, with the
// device header; it counts the inputs it saw.
func fakeEmbeddings(t *testing.T, inputs *atomic.Int64) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model  string   `json:"model"`
			Input  []string `json:"input"`
			Format string   `json:"encoding_format"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "bench/embed" {
			http.Error(w, fmt.Sprintf("bad request (%v, model %q)", err, req.Model), http.StatusBadRequest)
			return
		}
		inputs.Add(int64(len(req.Input)))
		type item struct {
			Object    string `json:"object"`
			Index     int    `json:"index"`
			Embedding any    `json:"embedding"`
		}
		var data []item
		// Answer in reverse order: the client must place vectors by index.
		for i := len(req.Input) - 1; i >= 0; i-- {
			v := []float32{float32(len(req.Input[i])), 0.5, -2}
			var e any = v
			if req.Format == "base64" {
				b := make([]byte, 4*len(v))
				for j, x := range v {
					binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
				}
				e = base64.StdEncoding.EncodeToString(b)
			}
			data = append(data, item{"embedding", i, e})
		}
		w.Header().Set("X-Modeld-Device", "cpu")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
}

func TestEmbedDecodesFloatAndBase64ByIndex(t *testing.T) {
	var n atomic.Int64
	srv := fakeEmbeddings(t, &n)
	defer srv.Close()
	for _, format := range []string{"float", "base64"} {
		p := httpParams{url: srv.URL, name: "bench/embed", format: format}
		vecs, dev, err := embed(context.Background(), srv.Client(), p, []string{"a", "bbb"})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if dev != "cpu" || len(vecs) != 2 || vecs[0][0] != 1 || vecs[1][0] != 3 || vecs[1][2] != -2 {
			t.Fatalf("%s: device %q vectors %v, want cpu [[1 0.5 -2] [3 0.5 -2]]", format, dev, vecs)
		}
	}
}

func TestEmbedReportsHTTPErrors(t *testing.T) {
	var n atomic.Int64
	srv := fakeEmbeddings(t, &n)
	defer srv.Close()
	_, _, err := embed(context.Background(), srv.Client(), httpParams{url: srv.URL, name: "other", format: "float"}, []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("err = %v, want the 400 answer", err)
	}
}

func TestHTTPSideRunsEveryCall(t *testing.T) {
	var n atomic.Int64
	srv := fakeEmbeddings(t, &n)
	defer srv.Close()
	wl := workload{texts: []string{"one", "two", "three"}, batch: 4, concurrency: 5, calls: 3}
	s, err := newHTTPSide(context.Background(), httpParams{url: srv.URL, name: "bench/embed", format: "float"}, wl)
	if err != nil {
		t.Fatal(err)
	}
	setup := n.Load() // the first request and the warm-up
	if setup != 1+3 || s.device != "cpu" {
		t.Fatalf("setup sent %d inputs on device %q, want 4 on cpu", setup, s.device)
	}
	if r, err := s.batch(context.Background()); err != nil || r <= 0 {
		t.Fatalf("batch = %v, %v", r, err)
	}
	if got := n.Load() - setup; got != 3*4 {
		t.Fatalf("batch run sent %d inputs, want 12", got)
	}
	if r, err := s.concurrent(context.Background()); err != nil || r <= 0 {
		t.Fatalf("concurrent = %v, %v", r, err)
	}
	if got := n.Load() - setup - 12; got != 5*3 {
		t.Fatalf("concurrent run sent %d inputs, want 15", got)
	}
	first, err := s.first(context.Background())
	if err != nil || len(first) != 3 || first[0] != 3 {
		t.Fatalf("first = %v, %v; want the vector of %q", first, err, "one")
	}
}

func TestWorkloadWindowsMatchPeer(t *testing.T) {
	wl := workload{texts: []string{"a", "b", "c", "d", "e"}, batch: 3, concurrency: 2}
	if got := strings.Join(wl.batchTexts(1), ""); got != "dea" {
		t.Fatalf("batchTexts(1) = %q, want dea", got)
	}
	if got := wl.singleText(1, 2); got != "a" { // (1 + 2*2) % 5
		t.Fatalf("singleText(1, 2) = %q, want a", got)
	}
}

func TestRotateStartsEachRepElsewhere(t *testing.T) {
	sides := []side{{name: "a"}, {name: "b"}, {name: "c"}}
	var got []string
	for rep := range 4 {
		var names string
		for _, s := range rotate(sides, rep) {
			names += s.name
		}
		got = append(got, names)
	}
	if strings.Join(got, " ") != "abc bca cab abc" {
		t.Fatalf("rotations %v", got)
	}
}

func TestPairedRatioAndMedian(t *testing.T) {
	// The pairs' ratios are 2, 2 and 0.5: their median is 2, while the ratio of
	// medians would be 200/100.
	if r := pairedRatio([]float64{200, 20, 100}, []float64{100, 10, 200}); r != 2 {
		t.Fatalf("pairedRatio = %v, want 2", r)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 3 {
		t.Fatalf("median = %v, want 3 (the upper middle)", m)
	}
	if d := maxAbsDiff([]float64{1, 2}, []float64{1.5, 1}); d != 1 {
		t.Fatalf("maxAbsDiff = %v, want 1", d)
	}
	if d := maxAbsDiff([]float64{1}, nil); !math.IsInf(d, 1) {
		t.Fatalf("maxAbsDiff of different lengths = %v, want +Inf", d)
	}
}

func sampleResult() benchResult {
	return benchResult{
		Threads: 2, Batch: 32, Concurrency: 32, Calls: 6, Reps: 3, ORT: "1.30.0", TransformersJS: "4.3.1",
		PeerThreads: 2, Format: "float", Device: "cpu", TokensPerText: 14.6, SortedChunk: 8, BatchWaitMs: 2, Lanes: 2,
		RunTokens: 2802, PaddedTokens: map[string]int{sideRaw: 4800, sideSorted: 3264, sideRawLanes: 3264},
		Rates: map[string]map[string][]float64{
			modeBatch: {
				sidePeer: {100, 100, 100}, sideRaw: {150, 150, 150}, sideSorted: {180, 180, 180}, sideRawLanes: {216, 216, 216},
				sidePipeline: {140, 140, 140}, sideOneLane: {112, 112, 112}, sideHTTP: {140, 140, 140},
			},
			modeConcurrent: {sidePeer: {50, 50, 50}, sidePipeline: {120, 120, 120}, sideOneLane: {100, 100, 100}, sideHTTP: {110, 110, 110}},
		},
		First: map[string][]float64{sidePeer: {0.6, 0.8}, sidePipeline: {0.6, 0.8}, sideHTTP: {0.6, 0.9}},
		Loads: []string{"1.0 1.0 1.0"},
	}
}

func TestMarkdownVerdicts(t *testing.T) {
	md, err := markdown(sampleResult(), "scripts/bench-pipelines/run", "2 CPUs", modelInfo{Layers: 6, Hidden: 384, Heads: 12, FFN: 1536, Vocab: 30522, bytes: 90e6})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		sectionHeading + "\n",
		"| modeld HTTP ÷ transformers.js, batch of 32 | **1.40×** (met) | 1.40× | ≥ 1.3× |",
		"| modeld HTTP ÷ transformers.js, 32 concurrent singles | **2.20×** (met) | 2.20× | ≥ 1.3× |",
		"| modeld HTTP ÷ ONNX Runtime alone (one padded batch of 32) | **0.93×** (met) | 0.93× | ≥ 0.9× |",
		"| modeld HTTP 32 concurrent singles ÷ ONNX Runtime alone (one padded batch of 32) | **0.73×** (**not met**) | 0.73× | ≥ 0.9× |",
		"| modeld HTTP ÷ in-process Embed, batch of 32 | **1.00×** (met) | 1.00× | ≥ 0.9× |",
		"| modeld HTTP ÷ in-process Embed, 32 concurrent singles | **0.92×** (met) | 0.92× | ≥ 0.9× |",
		"| modeld HTTP 32 concurrent singles ÷ in-process Embed of 32 | 0.79× | 0.79× | (report) |",
		"| transformers.js 4.3.1 in node | 100 (100–100) | 50 (50–50) |",
		"| ONNX Runtime alone (`onnx.Session.Run`, pre-tokenized), one padded batch on 2 threads | 150 (150–150) | – |",
		"| ONNX Runtime alone, length-sorted sub-batches of 8 in turn | 180 (180–180) | – |",
		"| ONNX Runtime alone, the same sub-batches of 8, 2 at once on single-thread runs | 216 (216–216) | – |",
		"| modeld pipeline in-process, `--pipeline-lanes 1` (one session on all threads) | 112 (112–112) | 100 (100–100) |",
		"| ONNX Runtime alone, length-sorted sub-batches of 8 ÷ one padded batch of 32 | 1.20× | 1.20× | (report) |",
		"| ONNX Runtime alone, sub-batches of 8: 2 single-thread runs at once ÷ in turn on 2 threads | 1.20× | 1.20× | (report) |",
		"| in-process Embed, 2 lanes ÷ 1 lane, batch of 32 | 1.25× | 1.25× | (report) |",
		"| in-process Embed, 2 lanes ÷ 1 lane, 32 concurrent singles | 1.20× | 1.20× | (report) |",
		"transformers.js runs at 67% of ONNX Runtime alone", "2802 real tokens are 4800 padded ones",
		"and 3264 when sorted", "runs that 1.20× faster", "2 at once, each on 1 thread of a second session",
		"HTTP keeps 100% of the in-process rate", "at\n50% of its batch rate", "keeps\n79% of its batch rate",
		"in-process yes", "HTTP **no** (max |Δ| 1.0e-01)",
		"BERT, 6 layers, hidden 384", "Machine: 2 CPUs.", "Reproduce: `scripts/bench-pipelines/run`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestMarkdownNeedsEverySide(t *testing.T) {
	res := sampleResult()
	delete(res.Rates[modeConcurrent], sideHTTP)
	if _, err := markdown(res, "cmd", "", modelInfo{}); err == nil || !strings.Contains(err.Error(), "concurrent runs of http") {
		t.Fatalf("err = %v, want a missing concurrent http side", err)
	}
}

func TestUpdateSectionKeepsOtherSections(t *testing.T) {
	body := sectionHeading + "\n\nnew figures\n"
	fresh := perfdoc.UpdateSection("", sectionHeading, body)
	if !strings.HasPrefix(fresh, "# Performance\n") || !strings.HasSuffix(fresh, "\n\n"+body) {
		t.Fatalf("new doc:\n%s", fresh)
	}
	doc := "# Performance\n\n## Chat (llama.cpp)\n\nchat\n\n" + sectionHeading + "\n\nold\nfigures\n\n## Store\n\nstore\n"
	got := perfdoc.UpdateSection(doc, sectionHeading, body)
	want := "# Performance\n\n## Chat (llama.cpp)\n\nchat\n\n" + body + "\n## Store\n\nstore\n"
	if got != want {
		t.Fatalf("updated doc:\n%q\nwant\n%q", got, want)
	}
	if again := perfdoc.UpdateSection(got, sectionHeading, body); again != got {
		t.Fatalf("a second update changed the doc:\n%s", again)
	}
}

func TestSubBatchesSortByTokenCount(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "onnx", "embed-mean"))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"the quick brown fox jumps", "hello", "the cat sat", "hello world"}
	if got := subBatches(tok, texts, 0); len(got) != 1 || !slices.Equal(got[0], texts) {
		t.Fatalf("chunk 0: %q, want the texts as one batch", got)
	}
	got := subBatches(tok, texts, 3)
	want := [][]string{{"hello", "hello world", "the cat sat"}, {"the quick brown fox jumps"}}
	if len(got) != len(want) || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Fatalf("chunk 3: %q, want %q", got, want)
	}
}

func TestParseFloats(t *testing.T) {
	v, err := parseFloats(" [0.5, -1.25e-3,3 ,-0] ")
	if err != nil || !slices.Equal(v, []float32{0.5, -1.25e-3, 3, 0}) {
		t.Fatalf("parseFloats = %v, %v", v, err)
	}
	if v, err := parseFloats("[]"); err != nil || len(v) != 0 {
		t.Fatalf("empty array = %v, %v", v, err)
	}
	for _, bad := range []string{`"AAAA"`, "[1,]", "[1,x]", "[1"} {
		if _, err := parseFloats(bad); err == nil {
			t.Errorf("parseFloats(%s) succeeded", bad)
		}
	}
}

func TestBestRunsRatio(t *testing.T) {
	v := verdict{a: []float64{100, 300, 120}, b: []float64{100, 150, 300}}
	if r, b := v.ratio(), v.best(); r != 1 || b != 1 {
		t.Fatalf("ratio %v best %v, want 1 (pairs 1, 2, 0.4) and 1 (300/300)", r, b)
	}
}
