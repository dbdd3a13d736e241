package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Parity of the task endpoints with the transformers.js goldens, through a real
// daemon (see TestPipelinesEndToEnd).

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
