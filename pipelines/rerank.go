package pipelines

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/modeld/modeld/backends"
)

// The rerank option and result types are backends'.
type (
	RerankOptions = backends.RerankOptions
	RerankScore   = backends.RerankScore
	RerankResult  = backends.RerankResult
)

// Reranker scores (query, document) pairs with a cross-encoder: a
// sequence-classification model with a single logit.
type Reranker struct {
	c *Classifier
}

// LoadReranker loads a cross-encoder model folder.
func LoadReranker(dir string, opts Options) (*Reranker, error) {
	c, err := LoadClassifier(dir, opts)
	if err != nil {
		return nil, err
	}
	if len(c.labels) != 1 {
		return nil, closeEncoder(c.enc, fmt.Errorf("pipelines: %s has %d output labels; a cross-encoder for rerank has one relevance logit: %w",
			dir, len(c.labels), ErrWrongModel))
	}
	return &Reranker{c: c}, nil
}

// Rerank scores every document against query and sorts them, most relevant first.
// Each pair is tokenized as (query, document) and truncated to the model's length.
func (r *Reranker) Rerank(ctx context.Context, query string, documents []string, opts RerankOptions) (RerankResult, error) {
	if query == "" {
		return RerankResult{}, fmt.Errorf("pipelines: empty query: %w", ErrInvalidInput)
	}
	if len(documents) == 0 {
		return RerankResult{}, fmt.Errorf("pipelines: no documents: %w", ErrInvalidInput)
	}
	if err := checkTexts(documents); err != nil {
		return RerankResult{}, err
	}
	if err := checkCount("documents", len(documents), MaxRerankDocuments); err != nil {
		return RerankResult{}, err
	}
	pairs := make([][2]string, len(documents))
	for i, d := range documents {
		pairs[i] = [2]string{query, d}
	}
	encs, u, err := r.c.enc.preprocessPairs(ctx, pairs)
	if err != nil {
		return RerankResult{}, err
	}
	outs, err := r.c.enc.forward(ctx, encs)
	if err != nil {
		return RerankResult{}, err
	}
	res := RerankResult{Results: make([]RerankScore, len(outs)), Tokens: u.tokens, Truncated: u.truncated, Device: r.Device()}
	for i, o := range outs {
		s := sigmoid(o.Data[0])
		if opts.RawScores {
			s = float64(o.Data[0])
		}
		res.Results[i] = RerankScore{Index: i, Score: s}
	}
	slices.SortStableFunc(res.Results, func(a, b RerankScore) int { return cmp.Compare(b.Score, a.Score) })
	if opts.TopN > 0 && opts.TopN < len(res.Results) {
		res.Results = res.Results[:opts.TopN]
	}
	return res, nil
}

// Device is where the model runs: "cpu" or "cuda:N".
func (r *Reranker) Device() string { return r.c.Device() }

// FallbackReason says why a pipeline asked to use the GPU runs on CPU.
func (r *Reranker) FallbackReason() string { return r.c.FallbackReason() }

// Size is the total size of the model folder's files in bytes.
func (r *Reranker) Size() int64 { return r.c.Size() }

// Task is TaskRerank.
func (r *Reranker) Task() Task { return TaskRerank }

// Close releases the model.
func (r *Reranker) Close() error { return r.c.Close() }
