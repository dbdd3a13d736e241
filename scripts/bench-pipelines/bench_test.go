package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
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
		PeerThreads: 2, Format: "float", Device: "cpu", TokensPerText: 14.6,
		Rates: map[string]map[string][]float64{
			modeBatch: {
				sidePeer: {100, 100, 100}, sideRaw: {150, 150, 150},
				sidePipeline: {140, 140, 140}, sideHTTP: {140, 140, 140},
			},
			modeConcurrent: {sidePeer: {50, 50, 50}, sidePipeline: {120, 120, 120}, sideHTTP: {110, 110, 110}},
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
		"| modeld HTTP ÷ transformers.js, batch of 32 | **1.40×** (met) | ≥ 1.3× |",
		"| modeld HTTP ÷ transformers.js, 32 concurrent singles | **2.20×** (met) | ≥ 1.3× |",
		"| modeld HTTP ÷ in-process Embed, batch of 32 | **1.00×** (met) | ≥ 0.9× |",
		"| modeld HTTP 32 concurrent singles ÷ in-process Embed of 32 | **0.79×** (**not met**) | ≥ 0.9× |",
		"| transformers.js 4.3.1 in node | 100 (100–100) | 50 (50–50) |",
		"| ONNX Runtime alone (`onnx.Session.Run`, pre-tokenized) | 150 (150–150) | – |",
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
	fresh := updateSection("", sectionHeading, body)
	if !strings.HasPrefix(fresh, "# Performance\n") || !strings.HasSuffix(fresh, "\n\n"+body) {
		t.Fatalf("new doc:\n%s", fresh)
	}
	doc := "# Performance\n\n## Chat (llama.cpp)\n\nchat\n\n" + sectionHeading + "\n\nold\nfigures\n\n## Store\n\nstore\n"
	got := updateSection(doc, sectionHeading, body)
	want := "# Performance\n\n## Chat (llama.cpp)\n\nchat\n\n" + body + "\n## Store\n\nstore\n"
	if got != want {
		t.Fatalf("updated doc:\n%q\nwant\n%q", got, want)
	}
	if again := updateSection(got, sectionHeading, body); again != got {
		t.Fatalf("a second update changed the doc:\n%s", again)
	}
}
