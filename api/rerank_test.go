package api

import (
	"context"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
)

// fakeRerank scores each document by its length over 10, most relevant first.
type fakeRerank struct {
	fakeBase
	gotQuery string
	gotDocs  []string
	gotOpts  backends.RerankOptions
}

func (f *fakeRerank) Rerank(_ context.Context, query string, docs []string, opts backends.RerankOptions) (backends.RerankResult, error) {
	f.gotQuery, f.gotDocs, f.gotOpts = query, docs, opts
	res := backends.RerankResult{Tokens: len(docs) * 4, Device: "cpu"}
	for i, d := range docs {
		res.Results = append(res.Results, backends.RerankScore{Index: i, Score: float64(len(d)) / 10})
	}
	// sort by score descending (insertion sort: few documents)
	r := res.Results
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j].Score > r[j-1].Score; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
	if opts.TopN > 0 && opts.TopN < len(r) {
		res.Results = r[:opts.TopN]
	}
	return res, nil
}

func TestRerankShape(t *testing.T) {
	rr := &fakeRerank{fakeBase: fakeBase{backends.TaskRerank}}
	s, _ := pipelineServer(t, map[string]backends.Model{"r": rr})
	var got tasks.RerankResponse
	decodeBody(t, pipePost(t, s, "/v1/rerank", `{"model":"r","query":"q","documents":["aa","a",{"text":"aaa"}],"top_n":2}`), &got)
	if got.Object != "list" || got.Model != "r" || got.Usage != (core.TaskUsage{PromptTokens: 12, TotalTokens: 12}) || len(got.Results) != 2 {
		t.Fatalf("response = %+v", got)
	}
	if r := got.Results[0]; r.Index != 2 || r.RelevanceScore != 0.3 || r.Document == nil || r.Document.Text != "aaa" {
		t.Errorf("results[0] = %+v", r)
	}
	if r := got.Results[1]; r.Index != 0 || r.Document == nil || r.Document.Text != "aa" {
		t.Errorf("results[1] = %+v", r)
	}
	if rr.gotQuery != "q" || strings.Join(rr.gotDocs, ",") != "aa,a,aaa" || rr.gotOpts.TopN != 2 {
		t.Errorf("call = %q %q %+v", rr.gotQuery, rr.gotDocs, rr.gotOpts)
	}
	// llama.cpp's server aliases answer the same; return_documents false drops the text.
	for _, path := range []string{"/v1/reranking", "/rerank", "/reranking"} {
		w := pipePost(t, s, path, `{"model":"r","query":"q","documents":["aa","a"],"return_documents":false}`)
		got = tasks.RerankResponse{}
		decodeBody(t, w, &got)
		if len(got.Results) != 2 || got.Results[0].Index != 0 || got.Results[0].Document != nil || rr.gotOpts.TopN != 0 {
			t.Errorf("%s: %s", path, w.Body)
		}
		if strings.Contains(w.Body.String(), `"document"`) {
			t.Errorf("%s: document present with return_documents false: %s", path, w.Body)
		}
	}
}

func TestRerankValidation(t *testing.T) {
	rr := &fakeRerank{fakeBase: fakeBase{backends.TaskRerank}}
	s, _ := pipelineServer(t, map[string]backends.Model{"r": rr})
	cases := []struct{ body, param, msg string }{
		{`{"model":"r","documents":["a"]}`, "query", "query is required"},
		{`{"model":"r","query":"","documents":["a"]}`, "query", "empty string"},
		{`{"model":"r","query":"q"}`, "documents", "documents is required"},
		{`{"model":"r","query":"q","documents":[]}`, "documents", "documents is required"},
		{`{"model":"r","query":"q","documents":["a",""]}`, "documents", "documents[1] is an empty string"},
		{`{"model":"r","query":"q","documents":["a",7]}`, "documents", "documents[1] must be a string"},
		{`{"model":"r","query":"q","documents":["a"],"top_n":0}`, "top_n", "at least 1"},
	}
	for _, c := range cases {
		wantError(t, pipePost(t, s, "/v1/rerank", c.body), 400, c.param, c.msg)
	}
	if rr.gotDocs != nil {
		t.Error("an invalid request reached the model")
	}
}
