package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// ClassifyRequest is modeld's classification request, after transformers.js's
// text-classification options (top_k, function_to_apply) and, when
// candidate_labels is given, its zero-shot-classification options
// (hypothesis_template, multi_label).
type ClassifyRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
	// TopK: labels per input, best first. Absent: 1 (all for zero-shot); null or
	// -1: all.
	TopK            json.RawMessage `json:"top_k"`
	FunctionToApply string          `json:"function_to_apply"`

	CandidateLabels    *[]string `json:"candidate_labels"`
	HypothesisTemplate *string   `json:"hypothesis_template"`
	MultiLabel         *bool     `json:"multi_label"`

	KeepAlive core.KeepAlive `json:"keep_alive"`
}

// LabelScore is one label's score.
type LabelScore struct {
	Label string  `json:"label"`
	Score float64 `json:"score"`
}

// Classification holds one input's labels, best first.
type Classification struct {
	Object string       `json:"object"` // "classification"
	Index  int          `json:"index"`
	Labels []LabelScore `json:"labels"`
}

// ClassificationList is the classify response.
type ClassificationList struct {
	Object string           `json:"object"` // "list"
	Model  string           `json:"model"`
	Data   []Classification `json:"data"`
	Usage  core.TaskUsage   `json:"usage"`
}

// classifyPlan is a validated classify request.
type classifyPlan struct {
	texts    []string
	topK     int // <= 0: all
	zeroShot bool
	labels   []string
	opts     backends.ClassifyOptions
	zsOpts   backends.ZeroShotOptions
}

func (r *ClassifyRequest) Plan() (*classifyPlan, error) {
	var errs []error
	p := &classifyPlan{zeroShot: r.CandidateLabels != nil}
	texts, err := core.ParseTexts("input", r.Input, core.MaxClassifyInputs)
	if err != nil {
		errs = append(errs, err)
	}
	p.texts = texts
	p.topK = 1
	if p.zeroShot {
		p.topK = 0
	}
	switch s := string(r.TopK); s {
	case "":
	case "null":
		p.topK = 0
	default:
		var k int
		if err := json.Unmarshal(r.TopK, &k); err != nil || k == 0 || k < -1 {
			errs = append(errs, core.BadRequest("top_k", "top_k must be a positive integer, or -1 or null for all labels; got %s", core.Clip(s)))
		} else if k > 0 {
			p.topK = k
		} else {
			p.topK = 0
		}
	}
	if p.zeroShot {
		p.labels = *r.CandidateLabels
		switch n := len(p.labels); {
		case n == 0:
			errs = append(errs, core.BadRequest("candidate_labels", "candidate_labels is empty; give at least one label"))
		case n > core.MaxCandidateLabels:
			errs = append(errs, core.TooMany("candidate_labels", n, core.MaxCandidateLabels, "labels"))
		case len(texts)*n > core.MaxZeroShotPairs:
			errs = append(errs, core.BadRequest("candidate_labels", "%d texts × %d candidate_labels is %d text-label pairs, more than the %d allowed; send fewer texts or labels per request",
				len(texts), n, len(texts)*n, core.MaxZeroShotPairs))
		}
		for i, l := range p.labels {
			if l == "" {
				errs = append(errs, core.BadRequest("candidate_labels", "candidate_labels[%d] is an empty string", i))
			}
		}
		if r.FunctionToApply != "" {
			errs = append(errs, core.BadRequest("function_to_apply", "function_to_apply does not apply to zero-shot classification (candidate_labels)"))
		}
		if r.HypothesisTemplate != nil {
			p.zsOpts.HypothesisTemplate = *r.HypothesisTemplate
			if *r.HypothesisTemplate == "" {
				errs = append(errs, core.BadRequest("hypothesis_template", "hypothesis_template is empty; it needs {} where the label goes, e.g. %q", backends.DefaultHypothesisTemplate))
			} else if !strings.Contains(*r.HypothesisTemplate, "{}") {
				errs = append(errs, core.BadRequest("hypothesis_template", "hypothesis_template %s has no {} where the label goes, e.g. %q", core.Quote(*r.HypothesisTemplate), backends.DefaultHypothesisTemplate))
			}
		}
		if r.MultiLabel != nil {
			p.zsOpts.MultiLabel = *r.MultiLabel
		}
		return p, core.JoinBadRequests(errs)
	}
	if r.HypothesisTemplate != nil || r.MultiLabel != nil {
		errs = append(errs, core.BadRequest("candidate_labels", "hypothesis_template and multi_label need candidate_labels (zero-shot classification)"))
	}
	if p.opts.Function, err = backends.ParseScoring(r.FunctionToApply); err != nil {
		errs = append(errs, core.BadRequest("function_to_apply", "function_to_apply %s is not one of softmax, sigmoid, none", core.Quote(r.FunctionToApply)))
	}
	p.opts.TopK = p.topK
	return p, core.JoinBadRequests(errs)
}

func (s *tasksAPI) classify(c *gin.Context) {
	var req ClassifyRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	plan, err := req.Plan()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	h, p, err := s.AcquireModel(c, req.Model, req.KeepAlive, core.ClassifyEndpoint)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	defer h.Release()
	var out *ClassificationList
	var truncated int
	if plan.zeroShot {
		out, truncated, err = zeroShot(c.Request.Context(), req.Model, p, plan)
	} else {
		out, truncated, err = classifyTexts(c.Request.Context(), req.Model, p, plan)
	}
	if err != nil {
		core.WriteError(c, err)
		return
	}
	for _, d := range out.Data {
		for _, l := range d.Labels {
			if !core.Finite(l.Score) {
				core.WriteError(c, core.NonFinite(req.Model))
				return
			}
		}
	}
	core.NoteTokens(c, out.Usage.PromptTokens, 0)
	core.SetTruncated(c, truncated)
	c.JSON(http.StatusOK, out)
}

func classifyTexts(ctx context.Context, id string, p backends.Model, plan *classifyPlan) (*ClassificationList, int, error) {
	cl, ok := p.(backends.Classifier)
	if !ok {
		if _, zs := p.(backends.ZeroShotClassifier); zs {
			return nil, 0, core.BadRequest("candidate_labels", "model %s is a zero-shot classifier: give candidate_labels", core.Quote(id))
		}
		return nil, 0, core.WrongModel(id, p, "text classification")
	}
	res, err := cl.Classify(ctx, plan.texts, plan.opts)
	if err != nil {
		return nil, 0, err
	}
	out := &ClassificationList{Object: "list", Model: id, Data: make([]Classification, len(res.Results)), Usage: core.NewTaskUsage(res.Tokens)}
	for i, r := range res.Results {
		labels := make([]LabelScore, len(r))
		for j, l := range r {
			labels[j] = LabelScore{Label: l.Label, Score: l.Score}
		}
		out.Data[i] = Classification{Object: "classification", Index: i, Labels: labels}
	}
	return out, res.Truncated, nil
}

func zeroShot(ctx context.Context, id string, p backends.Model, plan *classifyPlan) (*ClassificationList, int, error) {
	zs, ok := p.(backends.ZeroShotClassifier)
	if !ok {
		return nil, 0, core.WrongModel(id, p, "zero-shot classification")
	}
	res, err := zs.ClassifyZeroShot(ctx, plan.texts, plan.labels, plan.zsOpts)
	if errors.Is(err, backends.ErrWrongModel) {
		// A classifier whose labels do not make it an NLI model.
		e := core.BadRequest("candidate_labels", "model %s cannot do zero-shot classification (it needs an NLI model whose labels include entailment and contradiction); drop candidate_labels to use its own labels: %v", core.Quote(id), err)
		e.Code = "wrong_model_type"
		return nil, 0, e
	}
	if err != nil {
		return nil, 0, err
	}
	out := &ClassificationList{Object: "list", Model: id, Data: make([]Classification, len(res.Results)), Usage: core.NewTaskUsage(res.Tokens)}
	for i, r := range res.Results {
		n := len(r.Labels)
		if plan.topK > 0 && plan.topK < n {
			n = plan.topK
		}
		labels := make([]LabelScore, n)
		for j := range n {
			labels[j] = LabelScore{Label: r.Labels[j], Score: r.Scores[j]}
		}
		out.Data[i] = Classification{Object: "classification", Index: i, Labels: labels}
	}
	return out, res.Truncated, nil
}
