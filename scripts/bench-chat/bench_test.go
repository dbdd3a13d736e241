package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/perfdoc"
)

// fakeCompletions serves /v1/completions as modeld streams it: one chunk per
// token (the first token releasing no text), a finish chunk, the usage
// chunk, then [DONE].
func fakeCompletions(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := decodeBody(r, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 1; i < body.MaxTokens; i++ {
			fmt.Fprintf(w, "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\" t%d\",\"finish_reason\":null}]}\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":3}}}\n\n", body.MaxTokens)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

func TestCompletionStreamCountsTokensByUsage(t *testing.T) {
	srv := fakeCompletions(t)
	defer srv.Close()
	p := httpParams{url: srv.URL, name: "bench/f16"}
	s, err := completionStream(context.Background(), srv.Client(), p, "hi", 5)
	if err != nil {
		t.Fatal(err)
	}
	if s.tokens != 5 || s.promptTokens != 11 || s.cached != 3 || s.finish != "length" {
		t.Fatalf("tokens %d prompt %d cached %d finish %q, want 5 11 3 length", s.tokens, s.promptTokens, s.cached, s.finish)
	}
	if len(s.chunkTimes) != 4 || s.text.String() != " t1 t2 t3 t4" {
		t.Fatalf("%d chunks with text %q, want 4 and \" t1 t2 t3 t4\"", len(s.chunkTimes), s.text.String())
	}
	if s.first.Before(s.start) || s.last.Before(s.first) {
		t.Fatalf("times out of order: start %v first %v last %v", s.start, s.first, s.last)
	}
}

func TestCompletionStreamErrors(t *testing.T) {
	srv := fakeCompletions(t)
	defer srv.Close()
	p := httpParams{url: srv.URL + "/nowhere", name: "x"}
	if _, err := completionStream(context.Background(), srv.Client(), p, "hi", 3); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v, want a 404 error", err)
	}
	var s sseStream
	err := s.read(strings.NewReader("data: {\"error\":{\"message\":\"runner died\"}}\n\n"))
	if err == nil || !strings.Contains(err.Error(), "runner died") {
		t.Fatalf("err = %v, want the error event's message", err)
	}
	err = s.read(strings.NewReader("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"))
	if err == nil || !strings.Contains(err.Error(), "[DONE]") {
		t.Fatalf("err = %v, want a missing [DONE] error", err)
	}
}

func TestMedianQuantileRate(t *testing.T) {
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median = %v, want 3", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("median(nil) = %v, want 0", got)
	}
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := quantile(xs, 0.99); got != 10 {
		t.Errorf("p99 = %v, want 10", got)
	}
	if got := quantile(xs, 0.5); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := decodeRate(101, 0, 2); got != 50 {
		t.Errorf("decodeRate = %v, want 50", got)
	}
	if got := decodeRate(1, 0, 2); got != 0 {
		t.Errorf("decodeRate of one token = %v, want 0", got)
	}
}

func TestVariantsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for i := range variantWords {
		v := variant("p", i)
		if seen[v] || !strings.HasSuffix(v, " p") {
			t.Fatalf("variant %d = %q: repeated or not ending in the prompt", i, v)
		}
		seen[v] = true
	}
}

func TestUpdateSection(t *testing.T) {
	h := sectionHeading
	cases := []struct{ name, doc, want string }{
		{"new file", "", "# Performance\n\nMeasured figures of modeld against named peers, each with the command that reproduces it.\n\n" + h + "\nnew\n"},
		{"append", "# P\n\n## Embed\nx\n", "# P\n\n## Embed\nx\n\n" + h + "\nnew\n"},
		{"replace middle", "# P\n\n" + h + "\nold\nold\n\n## Embed\nx\n", "# P\n\n" + h + "\nnew\n\n## Embed\nx\n"},
		{"replace last", "# P\n\n## Embed\nx\n\n" + h + "\nold\n", "# P\n\n## Embed\nx\n\n" + h + "\nnew\n"},
	}
	for _, c := range cases {
		if got := perfdoc.UpdateSection(c.doc, h, h+"\nnew\n"); got != c.want {
			t.Errorf("%s: got\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

func decodeBody(r *http.Request, v any) error {
	return json.NewDecoder(r.Body).Decode(v)
}

func TestSummaryRatiosAndDoc(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ids := []int32{5, 6, 7}
	peer := write("peer.json", peerResult{Threads: 1, PromptTokens: 11, Tokens: 3, Decode: []float64{400, 500, 600}, TTFTMs: []float64{5}, IDs: ids, Text: "abc"})
	eng := write("engine.json", engineResult{Threads: 1, BatchThreads: 2, Context: 1024, Tokens: 3, Streams: 4,
		Direct: layerResult{Decode: []float64{600}, TTFTMs: []float64{4}, Aggregate: []float64{900}},
		Engine: layerResult{Decode: []float64{600}, TTFTMs: []float64{5}, Aggregate: []float64{900}, PromptTokens: 11, IDs: ids}})
	web := write("http.json", httpResult{Tokens: 3, Streams: 4, PromptTokens: 11, Decode: []float64{475, 480, 490},
		TTFTMs: []float64{10}, Aggregate: []float64{960}, Text: "abc"})
	doc := filepath.Join(dir, "PERFORMANCE.md")
	if err := os.WriteFile(doc, []byte("# Performance\n\n## Other\nkeep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := runSummary([]string{"-peer", peer, "-engine", eng, "-http", web, "-load", "3% busy, load 0.1 0.2 0.3", "-doc", doc}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**0.96** (met)",              // 480 / 500
		"**2.00×** (met)",             // 960 / 480
		"**6.0 ms**",                  // 10 - 4
		"| 1.50× |",                   // 900 / 600
		"equal node-llama-cpp's: yes", // ids
		"3% busy, load 0.1 0.2 0.3",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "## Other\nkeep me\n") || !strings.Contains(string(b), sectionHeading+"\n") {
		t.Fatalf("doc lost the other section or lacks the chat one:\n%s", b)
	}
}
