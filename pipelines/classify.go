package pipelines

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modeld/modeld/backends"
)

// The classification option and result types are backends'.
type (
	Scoring         = backends.Scoring
	ClassifyOptions = backends.ClassifyOptions
	LabelScore      = backends.LabelScore
	ClassifyResult  = backends.ClassifyResult
	ZeroShotOptions = backends.ZeroShotOptions
	ZeroShotScores  = backends.ZeroShotScores
	ZeroShotResult  = backends.ZeroShotResult
)

// Scorings. The model's default is ScoringSigmoid when config.json says
// problem_type multi_label_classification, else ScoringSoftmax.
const (
	ScoringSoftmax = backends.ScoringSoftmax
	ScoringSigmoid = backends.ScoringSigmoid
	ScoringNone    = backends.ScoringNone
)

// ParseScoring accepts softmax, sigmoid and none; "" means the model's default.
func ParseScoring(s string) (Scoring, error) { return backends.ParseScoring(s) }

// DefaultHypothesisTemplate is the zero-shot hypothesis template transformers.js uses.
const DefaultHypothesisTemplate = backends.DefaultHypothesisTemplate

// Classifier is a text-classification pipeline (a sequence-classification model
// with a logits output and id2label in config.json).
type Classifier struct {
	enc     *encoderModel
	labels  []string
	scoring Scoring
}

// LoadClassifier loads a sequence-classification model folder.
func LoadClassifier(dir string, opts Options) (*Classifier, error) {
	files, err := loadFiles(dir)
	if err != nil {
		return nil, err
	}
	enc, err := loadEncoder(files, "logits", "text-classification", opts)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, o := range enc.sess.Outputs() {
		if o.Name == "logits" {
			if len(o.Shape) != 2 || o.Shape[1] <= 0 {
				return nil, closeEncoder(enc, fmt.Errorf("pipelines: %s: logits shape %v is not [batch, labels]: %w", dir, o.Shape, ErrWrongModel))
			}
			n = int(o.Shape[1])
		}
	}
	scoring := ScoringSoftmax
	if files.config.ProblemType == "multi_label_classification" {
		scoring = ScoringSigmoid
	}
	return &Classifier{enc: enc, labels: files.config.labels(n), scoring: scoring}, nil
}

func closeEncoder(enc *encoderModel, err error) error {
	if cerr := enc.close(); cerr != nil {
		return fmt.Errorf("%w (and closing: %v)", err, cerr)
	}
	return err
}

// Labels are the model's labels by output index.
func (c *Classifier) Labels() []string { return c.labels }

// Classify scores each text against the model's labels.
func (c *Classifier) Classify(ctx context.Context, texts []string, opts ClassifyOptions) (ClassifyResult, error) {
	if err := checkTexts(texts); err != nil {
		return ClassifyResult{}, err
	}
	if err := checkCount("input texts", len(texts), MaxClassifyInputs); err != nil {
		return ClassifyResult{}, err
	}
	fn, err := ParseScoring(string(opts.Function))
	if err != nil {
		return ClassifyResult{}, err
	}
	if fn == "" {
		fn = c.scoring
	}
	encs, u, err := c.enc.preprocess(ctx, texts)
	if err != nil {
		return ClassifyResult{}, err
	}
	outs, err := c.enc.forward(ctx, encs)
	if err != nil {
		return ClassifyResult{}, err
	}
	res := ClassifyResult{Results: make([][]LabelScore, len(outs)), Tokens: u.tokens, Truncated: u.truncated, Device: c.Device()}
	for i, o := range outs {
		res.Results[i] = topK(score(o.Data, fn), c.labels, opts.TopK)
	}
	return res, nil
}

func score(logits []float32, fn Scoring) []float64 {
	switch fn {
	case ScoringSigmoid:
		out := make([]float64, len(logits))
		for i, x := range logits {
			out[i] = sigmoid(x)
		}
		return out
	case ScoringNone:
		out := make([]float64, len(logits))
		for i, x := range logits {
			out[i] = float64(x)
		}
		return out
	}
	return softmax(logits)
}

// topK sorts scores best first (ties: lower index first) and keeps k (<= 0: all).
func topK(scores []float64, labels []string, k int) []LabelScore {
	out := make([]LabelScore, len(scores))
	for i, s := range scores {
		out[i] = LabelScore{Label: labels[i], Index: i, Score: s}
	}
	slices.SortStableFunc(out, func(a, b LabelScore) int { return cmp.Compare(b.Score, a.Score) })
	if k > 0 && k < len(out) {
		out = out[:k]
	}
	return out
}

// Device is where the model runs: "cpu" or "cuda:N".
func (c *Classifier) Device() string { return c.enc.sess.Device() }

// FallbackReason says why a pipeline asked to use the GPU runs on CPU.
func (c *Classifier) FallbackReason() string { return c.enc.sess.FallbackReason() }

// Size is the total size of the model folder's files in bytes.
func (c *Classifier) Size() int64 { return c.enc.files.size }

// Task is TaskClassify.
func (c *Classifier) Task() Task { return TaskClassify }

// Close releases the model.
func (c *Classifier) Close() error { return c.enc.close() }

// ZeroShot classifies texts against labels chosen per request with an NLI model:
// each (text, hypothesis) pair is scored for entailment, as transformers.js's
// zero-shot-classification pipeline does.
type ZeroShot struct {
	c                       *Classifier
	entailment, contradicts int
}

// LoadZeroShot loads an NLI model folder (labels entailment and contradiction, or
// not_entailment, in config.json).
func LoadZeroShot(dir string, opts Options) (*ZeroShot, error) {
	c, err := LoadClassifier(dir, opts)
	if err != nil {
		return nil, err
	}
	z, err := c.ZeroShot()
	if err != nil {
		return nil, closeEncoder(c.enc, err)
	}
	return z, nil
}

// ZeroShot returns a zero-shot view of a loaded classifier (sharing its model),
// or ErrWrongModel when the model is not an NLI model.
func (c *Classifier) ZeroShot() (*ZeroShot, error) {
	z := &ZeroShot{c: c, entailment: -1, contradicts: -1}
	for i, l := range c.labels {
		switch strings.ToLower(l) {
		case "entailment":
			z.entailment = i
		case "contradiction", "not_entailment":
			if z.contradicts < 0 || strings.ToLower(l) == "contradiction" {
				z.contradicts = i
			}
		}
	}
	if z.entailment < 0 || z.contradicts < 0 {
		return nil, fmt.Errorf("pipelines: %s labels %v lack entailment and contradiction, so it is not an NLI model for zero-shot classification: %w",
			c.enc.files.dir, c.labels, ErrWrongModel)
	}
	return z, nil
}

// Classify scores each text against candidateLabels.
func (z *ZeroShot) Classify(ctx context.Context, texts, candidateLabels []string, opts ZeroShotOptions) (ZeroShotResult, error) {
	if err := checkTexts(texts); err != nil {
		return ZeroShotResult{}, err
	}
	if len(candidateLabels) == 0 {
		return ZeroShotResult{}, fmt.Errorf("pipelines: no candidate labels: %w", ErrInvalidInput)
	}
	if err := checkCount("candidate labels", len(candidateLabels), MaxCandidateLabels); err != nil {
		return ZeroShotResult{}, err
	}
	if err := checkCount("text-label pairs", len(texts)*len(candidateLabels), MaxZeroShotPairs); err != nil {
		return ZeroShotResult{}, err
	}
	for i, l := range candidateLabels {
		if l == "" {
			return ZeroShotResult{}, fmt.Errorf("pipelines: candidate label %d is empty: %w", i, ErrInvalidInput)
		}
	}
	tmpl := opts.HypothesisTemplate
	if tmpl == "" {
		tmpl = DefaultHypothesisTemplate
	}
	if !strings.Contains(tmpl, "{}") {
		return ZeroShotResult{}, fmt.Errorf("pipelines: hypothesis template %s has no {} for the label: %w", quoteInput(tmpl), ErrInvalidInput)
	}
	pairs := make([][2]string, 0, len(texts)*len(candidateLabels))
	for _, t := range texts {
		for _, l := range candidateLabels {
			pairs = append(pairs, [2]string{t, strings.Replace(tmpl, "{}", l, 1)})
		}
	}
	encs, u, err := z.c.enc.preprocessPairs(ctx, pairs)
	if err != nil {
		return ZeroShotResult{}, err
	}
	outs, err := z.c.enc.forward(ctx, encs)
	if err != nil {
		return ZeroShotResult{}, err
	}
	each := opts.MultiLabel || len(candidateLabels) == 1
	res := ZeroShotResult{Results: make([]ZeroShotScores, len(texts)), Tokens: u.tokens, Truncated: u.truncated, Device: z.Device()}
	n := len(candidateLabels)
	for i, t := range texts {
		var scores []float64
		if each {
			scores = make([]float64, n)
			for j := range n {
				logits := outs[i*n+j].Data
				scores[j] = softmax([]float32{logits[z.contradicts], logits[z.entailment]})[1]
			}
		} else {
			entail := make([]float32, n)
			for j := range n {
				entail[j] = outs[i*n+j].Data[z.entailment]
			}
			scores = softmax(entail)
		}
		ranked := topK(scores, candidateLabels, 0)
		r := ZeroShotScores{Sequence: t, Labels: make([]string, n), Scores: make([]float64, n)}
		for j, ls := range ranked {
			r.Labels[j], r.Scores[j] = ls.Label, ls.Score
		}
		res.Results[i] = r
	}
	return res, nil
}

// Device is where the model runs: "cpu" or "cuda:N".
func (z *ZeroShot) Device() string { return z.c.Device() }

// FallbackReason says why a pipeline asked to use the GPU runs on CPU.
func (z *ZeroShot) FallbackReason() string { return z.c.FallbackReason() }

// Size is the total size of the model folder's files in bytes.
func (z *ZeroShot) Size() int64 { return z.c.Size() }

// Task is TaskZeroShot.
func (z *ZeroShot) Task() Task { return TaskZeroShot }

// Close releases the model (shared with the Classifier it came from).
func (z *ZeroShot) Close() error { return z.c.Close() }
