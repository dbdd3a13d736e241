package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/models"
)

// The task pipelines end to end: fixtures imported with `modeld import`, served
// by a real `modeld serve` child process on the real ONNX Runtime, called over
// HTTP, and compared with the transformers.js goldens of testdata/onnx/goldens.

func fixtureDir(name string) string { return filepath.Join("..", "..", "testdata", "onnx", name) }

func readGoldenFile(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(fixtureDir(filepath.Join("goldens", name)))
	if err != nil {
		t.Fatalf("golden missing: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// call POSTs body as JSON and returns the status, headers and body.
func call(t *testing.T, base, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, out
}

// callOK POSTs body, requires 200 with X-Modeld-Device: cpu, and decodes the answer.
func callOK(t *testing.T, base, path string, body, out any) http.Header {
	t.Helper()
	status, hdr, b := call(t, base, path, body)
	if status != 200 {
		t.Fatalf("POST %s = %d: %s", path, status, b)
	}
	if dev := hdr.Get("X-Modeld-Device"); dev != "cpu" {
		t.Errorf("POST %s: X-Modeld-Device = %q, want cpu", path, dev)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, b)
	}
	return hdr
}

type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

// callError POSTs body and requires an OpenAI error answer with a status in [lo, hi].
func callError(t *testing.T, base, path string, body any, lo, hi int) apiError {
	t.Helper()
	status, _, b := call(t, base, path, body)
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("POST %s = %d, not an OpenAI error: %s", path, status, b)
	}
	if status < lo || status > hi {
		t.Fatalf("POST %s = %d, want %d..%d: %s", path, status, lo, hi, b)
	}
	return e
}

// importFixtures imports the test models into the store under home, and a copy of
// embed-cls whose graph is then corrupted in the store (t/corrupt).
func importFixtures(t *testing.T, home string) {
	t.Helper()
	env := map[string]string{"MODELD_HOME": home}
	for name, id := range map[string]string{
		"embed-mean": "t/embed", "classify": "t/classify", "nli": "t/nli", "rerank": "t/rerank",
		"summarize": "t/summarize", "embed-cls": "t/corrupt",
	} {
		if out, err := runCLI(t, env, "import", fixtureDir(name), "--name", id); err != nil {
			t.Fatalf("import %s: %v\n%s", name, err, out)
		}
	}
	// Import itself refuses a file that is not an ONNX graph...
	bad := t.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		copyFile(t, filepath.Join(fixtureDir("embed-cls"), f), filepath.Join(bad, f))
	}
	if err := os.MkdirAll(filepath.Join(bad, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "onnx", "model.onnx"), bytes.Repeat([]byte{0xff}, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, env, "import", bad, "--name", "t/garbage"); err == nil || !strings.Contains(err.Error(), "not an ONNX model") {
		t.Fatalf("import of a garbage model.onnx: %v\n%s", err, out)
	}
	// ...so t/corrupt is damaged where import cannot see it: inside the graph of
	// its blob (embed-cls's graph is not shared with any other imported model).
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Get("t/corrupt")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := st.FilePath(m, "onnx/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(b); i++ {
		b[i] = 0xff
	}
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func maxDiff(a []float32, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-b[i]))
	}
	return d
}

type embeddingList struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (l embeddingList) floats(t *testing.T) [][]float32 {
	t.Helper()
	out := make([][]float32, len(l.Data))
	for i, d := range l.Data {
		if d.Index != i || d.Object != "embedding" {
			t.Fatalf("data[%d] = index %d, object %q", i, d.Index, d.Object)
		}
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("data[%d]: bad base64 embedding: %v", i, err)
			}
			for j := 0; j < len(raw); j += 4 {
				out[i] = append(out[i], math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
			continue
		}
		if err := json.Unmarshal(d.Embedding, &out[i]); err != nil {
			t.Fatalf("data[%d]: %v", i, err)
		}
	}
	return out
}

func TestPipelinesEndToEnd(t *testing.T) {
	home := t.TempDir()
	importFixtures(t, home)
	_, base, logs := startDaemon(t, home)
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()

	t.Run("embeddings", func(t *testing.T) { checkEmbeddings(t, base) })
	t.Run("classify", func(t *testing.T) { checkClassify(t, base) })
	t.Run("zero-shot", func(t *testing.T) { checkZeroShot(t, base) })
	t.Run("rerank", func(t *testing.T) { checkRerank(t, base) })
	t.Run("summarize", func(t *testing.T) { checkSummarize(t, base) })
	t.Run("bad input", func(t *testing.T) { checkBadInput(t, base) })
	t.Run("concurrent", func(t *testing.T) { checkConcurrentEmbeddings(t, base) })
	t.Run("corrupt model", func(t *testing.T) { checkCorruptModel(t, base) })
}

func checkEmbeddings(t *testing.T, base string) {
	var g struct {
		Texts []string `json:"texts"`
		Cases []struct {
			Model     string      `json:"model"`
			Pooling   string      `json:"pooling"`
			Normalize bool        `json:"normalize"`
			Vectors   [][]float64 `json:"vectors"`
			InputIDs  [][]int64   `json:"input_ids"`
		} `json:"cases"`
	}
	readGoldenFile(t, "embed.json", &g)
	compared := 0
	for _, c := range g.Cases {
		if c.Model != "embed-mean" || c.InputIDs != nil {
			continue
		}
		req := map[string]any{"model": "t/embed", "input": g.Texts, "pooling": c.Pooling, "normalize": c.Normalize}
		if c.Pooling == "mean" && c.Normalize {
			// The model's own defaults (modules.json: mean pooling, Normalize) and
			// OpenAI's: no extension fields, base64 encoding.
			req = map[string]any{"model": "t/embed", "input": g.Texts, "encoding_format": "base64"}
		}
		var got embeddingList
		hdr := callOK(t, base, "/v1/embeddings", req, &got)
		if got.Object != "list" || got.Model != "t/embed" || got.Usage.PromptTokens <= len(g.Texts) || got.Usage.TotalTokens != got.Usage.PromptTokens {
			t.Errorf("envelope = %+v", got)
		}
		// The last golden text is longer than the model's 128 positions.
		if hdr.Get("X-Modeld-Truncated") != "1" {
			t.Errorf("X-Modeld-Truncated = %q, want 1", hdr.Get("X-Modeld-Truncated"))
		}
		for i, v := range got.floats(t) {
			if d := maxDiff(v, c.Vectors[i]); d > 1e-5 {
				t.Errorf("pooling %s normalize %v text %d: max abs diff %.3g > 1e-5", c.Pooling, c.Normalize, i, d)
			}
			compared++
		}
	}
	if compared != 6*9 {
		t.Fatalf("compared %d vectors, want 54", compared)
	}
	// dimensions: the first 8 values, renormalized.
	var full, short embeddingList
	if hdr := callOK(t, base, "/v1/embeddings", map[string]any{"model": "t/embed", "input": "hello world", "normalize": false}, &full); hdr.Get("X-Modeld-Truncated") != "0" {
		t.Errorf("a short text: X-Modeld-Truncated = %q, want 0", hdr.Get("X-Modeld-Truncated"))
	}
	callOK(t, base, "/v1/embeddings", map[string]any{"model": "t/embed", "input": "hello world", "dimensions": 8}, &short)
	f, s := full.floats(t)[0], short.floats(t)[0]
	norm := 0.0
	for _, x := range f[:8] {
		norm += float64(x) * float64(x)
	}
	norm = math.Sqrt(norm)
	for i := range s {
		if math.Abs(float64(s[i])-float64(f[i])/norm) > 1e-6 {
			t.Fatalf("dimensions 8: %v, want the first 8 of %v renormalized", s, f[:8])
		}
	}
	e := callError(t, base, "/v1/embeddings", map[string]any{"model": "t/embed", "input": "x", "dimensions": len(f) + 1}, 400, 400)
	if !strings.Contains(e.Error.Message, fmt.Sprintf("exceeds the %d dimensions", len(f))) {
		t.Errorf("dimensions too large: %s", e.Error.Message)
	}
}

type labelScore struct {
	Label string  `json:"label"`
	Score float64 `json:"score"`
}

type classificationList struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Index  int          `json:"index"`
		Labels []labelScore `json:"labels"`
	} `json:"data"`
}

func checkClassify(t *testing.T, base string) {
	var g struct {
		Texts []string `json:"texts"`
		Cases []struct {
			Model   string          `json:"model"`
			TopK    *int            `json:"top_k"`
			Results json.RawMessage `json:"results"`
		} `json:"cases"`
	}
	readGoldenFile(t, "classify.json", &g)
	compared := 0
	for _, c := range g.Cases {
		if c.Model != "classify" {
			continue
		}
		var want [][]labelScore
		req := map[string]any{"model": "t/classify", "input": g.Texts}
		if c.TopK == nil {
			req["top_k"] = nil // all labels
			if err := json.Unmarshal(c.Results, &want); err != nil {
				t.Fatal(err)
			}
		} else {
			var top []labelScore // transformers.js's default top_k 1 is modeld's too
			if err := json.Unmarshal(c.Results, &top); err != nil {
				t.Fatal(err)
			}
			for _, l := range top {
				want = append(want, []labelScore{l})
			}
		}
		var got classificationList
		callOK(t, base, "/v1/classify", req, &got)
		if got.Object != "list" || got.Model != "t/classify" || len(got.Data) != len(g.Texts) {
			t.Fatalf("response = %+v", got)
		}
		for i, d := range got.Data {
			if d.Index != i || len(d.Labels) != len(want[i]) {
				t.Fatalf("text %d: %+v, want %+v", i, d, want[i])
			}
			for j, l := range d.Labels {
				if l.Label != want[i][j].Label || math.Abs(l.Score-want[i][j].Score) > 1e-5 {
					t.Errorf("text %d label %d: %+v, transformers.js %+v", i, j, l, want[i][j])
				}
				compared++
			}
		}
	}
	if compared == 0 {
		t.Fatal("no classification compared")
	}
}

func checkZeroShot(t *testing.T, base string) {
	var g struct {
		Texts []string `json:"texts"`
		Cases []struct {
			CandidateLabels    []string `json:"candidate_labels"`
			MultiLabel         bool     `json:"multi_label"`
			HypothesisTemplate string   `json:"hypothesis_template"`
			Results            []struct {
				Labels []string  `json:"labels"`
				Scores []float64 `json:"scores"`
			} `json:"results"`
		} `json:"cases"`
	}
	readGoldenFile(t, "zeroshot.json", &g)
	for _, c := range g.Cases {
		req := map[string]any{"model": "t/nli", "input": g.Texts, "candidate_labels": c.CandidateLabels, "multi_label": c.MultiLabel}
		if c.HypothesisTemplate != "" {
			req["hypothesis_template"] = c.HypothesisTemplate
		}
		var got classificationList
		callOK(t, base, "/v1/classify", req, &got)
		for i, d := range got.Data {
			want := c.Results[i]
			if len(d.Labels) != len(want.Labels) {
				t.Fatalf("%v text %d: %+v, want %+v", c.CandidateLabels, i, d.Labels, want)
			}
			for j, l := range d.Labels {
				if l.Label != want.Labels[j] || math.Abs(l.Score-want.Scores[j]) > 1e-5 {
					t.Errorf("%v multi %v text %d: %+v, transformers.js %s %.6f", c.CandidateLabels, c.MultiLabel, i, l, want.Labels[j], want.Scores[j])
				}
			}
		}
	}
	// A classifier that is not an NLI model cannot do zero-shot.
	e := callError(t, base, "/v1/classify", map[string]any{"model": "t/classify", "input": "x", "candidate_labels": []string{"a"}}, 400, 400)
	if !strings.Contains(e.Error.Message, "cannot do zero-shot") {
		t.Errorf("zero-shot on a plain classifier: %s", e.Error.Message)
	}
}

func checkRerank(t *testing.T, base string) {
	var g struct {
		Cases []struct {
			Query     string    `json:"query"`
			Documents []string  `json:"documents"`
			Scores    []float64 `json:"scores"`
		} `json:"cases"`
	}
	readGoldenFile(t, "rerank.json", &g)
	for _, c := range g.Cases {
		order := make([]int, len(c.Documents))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(c.Scores[b], c.Scores[a]) })
		var got struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Results []struct {
				Index          int     `json:"index"`
				RelevanceScore float64 `json:"relevance_score"`
				Document       struct {
					Text string `json:"text"`
				} `json:"document"`
			} `json:"results"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			} `json:"usage"`
		}
		callOK(t, base, "/v1/rerank", map[string]any{"model": "t/rerank", "query": c.Query, "documents": c.Documents, "top_n": 3}, &got)
		if got.Object != "list" || got.Model != "t/rerank" || len(got.Results) != 3 || got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens {
			t.Fatalf("response = %+v", got)
		}
		for i, r := range got.Results {
			if r.Index != order[i] || math.Abs(r.RelevanceScore-c.Scores[order[i]]) > 1e-5 || r.Document.Text != c.Documents[order[i]] {
				t.Errorf("%q result %d: %+v, want document %d score %.6f", c.Query, i, r, order[i], c.Scores[order[i]])
			}
		}
	}
}

func checkSummarize(t *testing.T, base string) {
	var g struct {
		Texts       []string `json:"texts"`
		SummaryText []string `json:"summary_text"`
	}
	readGoldenFile(t, "summarize.json", &g)
	var got struct {
		Object string `json:"object"`
		Data   []struct {
			Index        int    `json:"index"`
			SummaryText  string `json:"summary_text"`
			FinishReason string `json:"finish_reason"`
		} `json:"data"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	callOK(t, base, "/v1/summarize", map[string]any{"model": "t/summarize", "input": g.Texts}, &got)
	if len(got.Data) != len(g.SummaryText) || got.Usage.CompletionTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("response = %+v", got)
	}
	for i, d := range got.Data {
		if d.Index != i || d.SummaryText == "" || d.SummaryText != g.SummaryText[i] || (d.FinishReason != "stop" && d.FinishReason != "length") {
			t.Errorf("text %d: %+v, transformers.js %q", i, d, g.SummaryText[i])
		}
	}

	// Streaming: the deltas, then a last event with the whole text and usage, then [DONE].
	res, err := http.Post(base+"/v1/summarize", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":"t/summarize","input":%q,"stream":true}`, g.Texts[0])))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || res.Header.Get("X-Modeld-Device") != "cpu" {
		t.Fatalf("stream: %d %v", res.StatusCode, res.Header)
	}
	var deltas strings.Builder
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events = %q", events)
	}
	for _, ev := range events[:len(events)-2] {
		var ch struct {
			Delta        string  `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		}
		if err := json.Unmarshal([]byte(ev), &ch); err != nil || ch.FinishReason != nil || ch.Delta == "" {
			t.Fatalf("chunk %s (%v)", ev, err)
		}
		deltas.WriteString(ch.Delta)
	}
	var last struct {
		FinishReason *string `json:"finish_reason"`
		SummaryText  string  `json:"summary_text"`
		Usage        *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(events[len(events)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if last.FinishReason == nil || last.SummaryText != g.SummaryText[0] || last.Usage == nil || last.Usage.CompletionTokens == 0 {
		t.Errorf("last event %s, want summary %q", events[len(events)-2], g.SummaryText[0])
	}
	if deltas.String() != g.SummaryText[0] {
		t.Errorf("streamed deltas %q, transformers.js %q", deltas.String(), g.SummaryText[0])
	}
}

func checkBadInput(t *testing.T, base string) {
	for _, path := range []string{"/v1/embeddings", "/v1/classify", "/v1/summarize"} {
		model := map[string]string{"/v1/embeddings": "t/embed", "/v1/classify": "t/classify", "/v1/summarize": "t/summarize"}[path]
		e := callError(t, base, path, map[string]any{"model": model, "input": ""}, 400, 400)
		if e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != "input" {
			t.Errorf("%s empty input: %+v", path, e.Error)
		}
		callError(t, base, path, map[string]any{"model": model, "input": []string{}}, 400, 400)
	}
	callError(t, base, "/v1/rerank", map[string]any{"model": "t/rerank", "query": "q", "documents": []string{""}}, 400, 400)

	// A 100k-character text is truncated to the model's length, not refused.
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 100000/44+1)[:100000]
	for path, body := range map[string]map[string]any{
		"/v1/embeddings": {"model": "t/embed", "input": []string{long, "short"}},
		"/v1/classify":   {"model": "t/classify", "input": long},
		"/v1/rerank":     {"model": "t/rerank", "query": "fox", "documents": []string{long}},
		"/v1/summarize":  {"model": "t/summarize", "input": long, "max_new_tokens": 4},
	} {
		var out map[string]any
		hdr := callOK(t, base, path, body, &out)
		if hdr.Get("X-Modeld-Truncated") != "1" {
			t.Errorf("%s: X-Modeld-Truncated = %q, want 1", path, hdr.Get("X-Modeld-Truncated"))
		}
	}

	// The wrong model for the task: 400 naming what the model serves.
	e := callError(t, base, "/v1/embeddings", map[string]any{"model": "t/rerank", "input": "x"}, 400, 400)
	if e.Error.Code != "wrong_model_type" || !strings.Contains(e.Error.Message, "serves reranking (POST /v1/rerank)") {
		t.Errorf("embeddings on a reranker: %+v", e.Error)
	}
	e = callError(t, base, "/v1/summarize", map[string]any{"model": "t/embed", "input": "x"}, 400, 400)
	if !strings.Contains(e.Error.Message, "serves embeddings") {
		t.Errorf("summarize on an embedder: %+v", e.Error)
	}
	callError(t, base, "/v1/embeddings", map[string]any{"model": "t/none", "input": "x"}, 404, 404)
}

func checkConcurrentEmbeddings(t *testing.T, base string) {
	words := strings.Fields("hello world quick brown fox jumps over lazy dog paris capital france movie wonderful terrible film weather sunny hot score win football café naïve résumé tokyo japan music travel science politics food sports")
	texts := make([]string, 32)
	for i := range texts {
		texts[i] = strings.Join(words[i%len(words):min(len(words), i%len(words)+1+i%5)], " ")
	}
	embed := func(text string) ([]float32, error) {
		b, _ := json.Marshal(map[string]any{"model": "t/embed", "input": text})
		res, err := http.Post(base+"/v1/embeddings", "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var l struct {
			Data []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if res.StatusCode != 200 {
			body, _ := io.ReadAll(res.Body)
			return nil, fmt.Errorf("status %d: %s", res.StatusCode, body)
		}
		if err := json.NewDecoder(res.Body).Decode(&l); err != nil || len(l.Data) != 1 {
			return nil, fmt.Errorf("decode: %v (%d items)", err, len(l.Data))
		}
		return l.Data[0].Embedding, nil
	}
	sequential := make([][]float32, len(texts))
	for i, text := range texts {
		v, err := embed(text)
		if err != nil {
			t.Fatal(err)
		}
		sequential[i] = v
	}
	concurrent := make([][]float32, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Go(func() { concurrent[i], errs[i] = embed(text) })
	}
	wg.Wait()
	worst := 0.0
	for i := range texts {
		if errs[i] != nil {
			t.Fatalf("concurrent request %d: %v", i, errs[i])
		}
		want := make([]float64, len(sequential[i]))
		for j, x := range sequential[i] {
			want[j] = float64(x)
		}
		worst = math.Max(worst, maxDiff(concurrent[i], want))
	}
	if worst > 1e-5 {
		t.Fatalf("32 concurrent vs 32 sequential requests: max abs diff %.3g > 1e-5", worst)
	}
	t.Logf("32 concurrent vs 32 sequential requests: max abs diff %.3g", worst)
}

func checkCorruptModel(t *testing.T, base string) {
	e := callError(t, base, "/v1/embeddings", map[string]any{"model": "t/corrupt", "input": "x"}, 500, 599)
	if e.Error.Type != "server_error" || !strings.Contains(e.Error.Message, `"t/corrupt"`) {
		t.Errorf("corrupt model: %+v", e.Error)
	}
	t.Logf("corrupt model: %s", e.Error.Message)
	// Asked again, it is refused again (the failed load cools down), and the
	// daemon still serves the good models.
	callError(t, base, "/v1/embeddings", map[string]any{"model": "t/corrupt", "input": "x"}, 500, 599)
	var got embeddingList
	callOK(t, base, "/v1/embeddings", map[string]any{"model": "t/embed", "input": "still alive"}, &got)
	if len(got.Data) != 1 {
		t.Fatalf("after the corrupt model: %+v", got)
	}
	res, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/health = %d", res.StatusCode)
	}
}
