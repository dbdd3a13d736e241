package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
)

// fakeClassify scores labels pos (0.7) and neg (0.3) for every text and records
// its options. It is not an NLI model: ClassifyZeroShot refuses.
type fakeClassify struct {
	fakeBase
	gotOpts backends.ClassifyOptions
	calls   int
}

func (f *fakeClassify) Classify(_ context.Context, texts []string, opts backends.ClassifyOptions) (backends.ClassifyResult, error) {
	f.gotOpts = opts
	f.calls++
	res := backends.ClassifyResult{Tokens: 2 * len(texts), Device: "cpu"}
	for range texts {
		all := []backends.LabelScore{{Label: "pos", Index: 1, Score: 0.7}, {Label: "neg", Index: 0, Score: 0.3}}
		if opts.TopK > 0 {
			all = all[:min(opts.TopK, len(all))]
		}
		res.Results = append(res.Results, all)
	}
	return res, nil
}

func (f *fakeClassify) ClassifyZeroShot(context.Context, []string, []string, backends.ZeroShotOptions) (backends.ZeroShotResult, error) {
	return backends.ZeroShotResult{}, fmt.Errorf("pipelines: labels [neg pos] lack entailment and contradiction: %w", backends.ErrWrongModel)
}

// fakeZeroShot ranks the candidate labels in reverse order with scores 0.5, 0.3, 0.2, ...
type fakeZeroShot struct {
	fakeBase
	gotLabels []string
	gotOpts   backends.ZeroShotOptions
}

func (f *fakeZeroShot) ClassifyZeroShot(_ context.Context, texts, labels []string, opts backends.ZeroShotOptions) (backends.ZeroShotResult, error) {
	f.gotLabels, f.gotOpts = labels, opts
	res := backends.ZeroShotResult{Tokens: len(texts) * len(labels), Device: "cpu"}
	for _, t := range texts {
		r := backends.ZeroShotScores{Sequence: t}
		score := 0.5
		for i := len(labels) - 1; i >= 0; i-- {
			r.Labels = append(r.Labels, labels[i])
			r.Scores = append(r.Scores, score)
			score /= 2
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func TestClassify(t *testing.T) {
	cl := &fakeClassify{fakeBase: fakeBase{backends.TaskClassify}}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": cl})
	var got tasks.ClassificationList
	decodeBody(t, pipePost(t, s, "/v1/classify", `{"model":"m","input":["a","b"]}`), &got)
	if got.Object != "list" || got.Model != "m" || len(got.Data) != 2 || got.Usage.PromptTokens != 4 || got.Usage.TotalTokens != 4 {
		t.Fatalf("response = %+v", got)
	}
	for i, d := range got.Data {
		if d.Object != "classification" || d.Index != i || len(d.Labels) != 1 || d.Labels[0] != (tasks.LabelScore{Label: "pos", Score: 0.7}) {
			t.Errorf("data[%d] = %+v", i, d)
		}
	}
	// transformers.js's default top_k is 1.
	if cl.gotOpts.TopK != 1 || cl.gotOpts.Function != "" {
		t.Errorf("default options = %+v", cl.gotOpts)
	}
	for body, wantK := range map[string]int{
		`{"model":"m","input":"a","top_k":null}`: 0,
		`{"model":"m","input":"a","top_k":-1}`:   0,
		`{"model":"m","input":"a","top_k":2}`:    2,
	} {
		decodeBody(t, pipePost(t, s, "/v1/classify", body), &got)
		if cl.gotOpts.TopK != wantK || len(got.Data[0].Labels) != 2 {
			t.Errorf("%s: top_k %d, %d labels", body, cl.gotOpts.TopK, len(got.Data[0].Labels))
		}
	}
	decodeBody(t, pipePost(t, s, "/v1/classify", `{"model":"m","input":"a","function_to_apply":"sigmoid"}`), &got)
	if cl.gotOpts.Function != backends.ScoringSigmoid {
		t.Errorf("function = %q", cl.gotOpts.Function)
	}
}

func TestZeroShot(t *testing.T) {
	z := &fakeZeroShot{fakeBase: fakeBase{backends.TaskZeroShot}}
	s, _ := pipelineServer(t, map[string]backends.Model{"z": z})
	var got tasks.ClassificationList
	decodeBody(t, pipePost(t, s, "/v1/classify", `{"model":"z","input":"a","candidate_labels":["x","y","w"],"hypothesis_template":"About {}.","multi_label":true}`), &got)
	if len(got.Data) != 1 || got.Usage.PromptTokens != 3 {
		t.Fatalf("response = %+v", got)
	}
	// Zero-shot returns every label by default, as transformers.js does.
	want := []tasks.LabelScore{{Label: "w", Score: 0.5}, {Label: "y", Score: 0.25}, {Label: "x", Score: 0.125}}
	if fmt.Sprint(got.Data[0].Labels) != fmt.Sprint(want) {
		t.Errorf("labels = %+v, want %+v", got.Data[0].Labels, want)
	}
	if z.gotOpts.HypothesisTemplate != "About {}." || !z.gotOpts.MultiLabel || len(z.gotLabels) != 3 {
		t.Errorf("options = %+v, labels %q", z.gotOpts, z.gotLabels)
	}
	decodeBody(t, pipePost(t, s, "/v1/classify", `{"model":"z","input":"a","candidate_labels":["x","y","w"],"top_k":1}`), &got)
	if len(got.Data[0].Labels) != 1 || got.Data[0].Labels[0].Label != "w" || z.gotOpts.MultiLabel || z.gotOpts.HypothesisTemplate != "" {
		t.Errorf("top_k 1: %+v (options %+v)", got.Data[0].Labels, z.gotOpts)
	}
	// A zero-shot model without candidate labels says what it needs.
	wantError(t, pipePost(t, s, "/v1/classify", `{"model":"z","input":"a"}`), 400, "candidate_labels", "give candidate_labels")
}

func TestClassifyValidation(t *testing.T) {
	cl := &fakeClassify{fakeBase: fakeBase{backends.TaskClassify}}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": cl})
	cases := []struct{ body, param, msg string }{
		{`{"model":"m","input":""}`, "input", "empty string"},
		{`{"model":"m","input":"a","top_k":0}`, "top_k", "positive integer"},
		{`{"model":"m","input":"a","top_k":"all"}`, "top_k", "positive integer"},
		{`{"model":"m","input":"a","function_to_apply":"relu"}`, "function_to_apply", "not one of softmax, sigmoid, none"},
		{`{"model":"m","input":"a","candidate_labels":[]}`, "candidate_labels", "candidate_labels is empty"},
		{`{"model":"m","input":"a","candidate_labels":["x",""]}`, "candidate_labels", "candidate_labels[1]"},
		{`{"model":"m","input":"a","candidate_labels":["x"],"function_to_apply":"softmax"}`, "function_to_apply", "does not apply to zero-shot"},
		{`{"model":"m","input":"a","candidate_labels":["x"],"hypothesis_template":""}`, "hypothesis_template", "needs {}"},
		{`{"model":"m","input":"a","multi_label":true}`, "candidate_labels", "need candidate_labels"},
	}
	for _, c := range cases {
		wantError(t, pipePost(t, s, "/v1/classify", c.body), 400, c.param, c.msg)
	}
	if cl.calls != 0 {
		t.Errorf("invalid requests reached the model %d times", cl.calls)
	}
	// Zero-shot on a classifier that is not an NLI model.
	e := wantError(t, pipePost(t, s, "/v1/classify", `{"model":"m","input":"a","candidate_labels":["x"]}`), 400, "candidate_labels",
		"cannot do zero-shot classification", "entailment and contradiction")
	if e.Error.Code != "wrong_model_type" {
		t.Errorf("code = %v", e.Error.Code)
	}
}
