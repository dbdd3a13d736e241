package pipelines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// texts returns n short distinct texts.
func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text %d", i)
	}
	return out
}

// TestCallBounds: each bound of one call refuses just over it with
// ErrInvalidInput, naming the count, and takes just up to it.
func TestCallBounds(t *testing.T) {
	opts := testOptions(t)
	ctx := context.Background()
	e, err := LoadEmbedder(modelDir(t, "embed-mean"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	c, err := LoadClassifier(modelDir(t, "classify"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, c)
	z, err := LoadZeroShot(modelDir(t, "nli"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, z)
	r, err := LoadReranker(modelDir(t, "rerank"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, r)
	s, err := LoadSummarizer(modelDir(t, "summarize"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	labels := func(n int) []string { return texts(n) }
	over := map[string]func() error{
		"embed inputs": func() error { _, err := e.Embed(ctx, texts(MaxEmbedInputs+1), EmbedOptions{}); return err },
		"classify inputs": func() error {
			_, err := c.Classify(ctx, texts(MaxClassifyInputs+1), ClassifyOptions{})
			return err
		},
		"labels": func() error {
			_, err := z.Classify(ctx, texts(1), labels(MaxCandidateLabels+1), ZeroShotOptions{})
			return err
		},
		"pairs": func() error {
			_, err := z.Classify(ctx, texts(MaxZeroShotPairs/64+1), labels(64), ZeroShotOptions{})
			return err
		},
		"documents": func() error {
			_, err := r.Rerank(ctx, "q", texts(MaxRerankDocuments+1), RerankOptions{})
			return err
		},
		"summarize inputs": func() error {
			_, err := s.Summarize(ctx, texts(MaxSummarizeInputs+1), SummarizeOptions{})
			return err
		},
		"beams": func() error {
			_, err := s.Summarize(ctx, texts(1), SummarizeOptions{NumBeams: MaxNumBeams + 1})
			return err
		},
		"max_new_tokens": func() error {
			_, err := s.Summarize(ctx, texts(1), SummarizeOptions{MaxNewTokens: MaxNewTokens + 1})
			return err
		},
		"min_new_tokens": func() error {
			n := MaxNewTokens + 1
			_, err := s.Summarize(ctx, texts(1), SummarizeOptions{MinNewTokens: &n})
			return err
		},
	}
	for name, call := range over {
		if err := call(); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%s over the bound: %v, want ErrInvalidInput saying what is allowed", name, err)
		}
	}
	// At the bounds (the cheap ones; the rest differ only in the count).
	if _, err := z.Classify(ctx, texts(MaxZeroShotPairs/MaxCandidateLabels), labels(MaxCandidateLabels), ZeroShotOptions{}); err != nil {
		t.Errorf("zero-shot at the bounds: %v", err)
	}
	if _, err := r.Rerank(ctx, "q", texts(MaxRerankDocuments), RerankOptions{}); err != nil {
		t.Errorf("rerank at the bound: %v", err)
	}
	if _, err := s.Summarize(ctx, texts(1), SummarizeOptions{NumBeams: MaxNumBeams, MaxNewTokens: 4}); err != nil {
		t.Errorf("summarize at the beam bound: %v", err)
	}
}

// TestSummarizeDecodesInGroups: texts × beams over MaxDecoderRows are decoded
// group by group, with the summaries of decoding each text alone.
func TestSummarizeDecodesInGroups(t *testing.T) {
	s, err := LoadSummarizer(modelDir(t, "summarize"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	ctx := context.Background()
	in := []string{"the quick brown fox jumps over the lazy dog", "hello world", "paris is the capital of france",
		"a b c d e f g", "rain in spain", "one more text"}
	opts := SummarizeOptions{NumBeams: MaxNumBeams, MaxNewTokens: 6} // groups of 64/16 = 4 texts: 2 groups
	if len(in)*opts.NumBeams <= MaxDecoderRows {
		t.Fatalf("the test needs more than %d rows", MaxDecoderRows)
	}
	all, err := s.Summarize(ctx, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Summaries) != len(in) {
		t.Fatalf("%d summaries for %d texts", len(all.Summaries), len(in))
	}
	var inputTokens int
	for i, text := range in {
		one, err := s.Summarize(ctx, []string{text}, opts)
		if err != nil {
			t.Fatal(err)
		}
		inputTokens += one.InputTokens
		if !slices.Equal(one.Summaries[0].TokenIDs, all.Summaries[i].TokenIDs) {
			t.Errorf("text %d alone %v, in groups %v", i, one.Summaries[0].TokenIDs, all.Summaries[i].TokenIDs)
		}
	}
	if all.InputTokens != inputTokens {
		t.Errorf("input tokens %d, want the sum %d", all.InputTokens, inputTokens)
	}
}
