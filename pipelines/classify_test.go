package pipelines

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type labelScoreJSON struct {
	Label string  `json:"label"`
	Score float64 `json:"score"`
}

func TestClassifyMatchesTransformersJS(t *testing.T) {
	var g struct {
		Texts []string `json:"texts"`
		Cases []struct {
			Model   string           `json:"model"`
			TopK    *int             `json:"top_k"`
			Results []rawLabelScores `json:"results"`
		} `json:"cases"`
	}
	readGolden(t, "classify.json", &g)
	opts := testOptions(t)
	worst, checked := 0.0, 0
	for _, c := range g.Cases {
		cl, err := LoadClassifier(modelDir(t, c.Model), opts)
		if err != nil {
			t.Fatal(err)
		}
		topK := 0
		if c.TopK != nil {
			topK = *c.TopK
		}
		res, err := cl.Classify(context.Background(), g.Texts, ClassifyOptions{TopK: topK})
		closeP(t, cl)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.Results {
			got := res.Results[i]
			if len(got) != len(want) {
				t.Fatalf("%s top_k=%v text %d: %d labels, want %d", c.Model, c.TopK, i, len(got), len(want))
			}
			for j := range want {
				d := math.Abs(got[j].Score - want[j].Score)
				worst = math.Max(worst, d)
				checked++
				if got[j].Label != want[j].Label || d > 1e-5 {
					t.Errorf("%s text %d rank %d: %s %.7f, transformers.js %s %.7f", c.Model, i, j, got[j].Label, got[j].Score, want[j].Label, want[j].Score)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("nothing compared")
	}
	t.Logf("classification: %d scores, same labels in the same order, max abs diff %.3g", checked, worst)
}

// rawLabelScores is one text's labels: transformers.js returns an object for
// top_k 1 and a list otherwise.
type rawLabelScores []labelScoreJSON

func (r *rawLabelScores) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var one labelScoreJSON
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*r = []labelScoreJSON{one}
		return nil
	}
	var many []labelScoreJSON
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*r = many
	return nil
}

func TestClassifyScoringAndTopK(t *testing.T) {
	opts := testOptions(t)
	ml, err := LoadClassifier(modelDir(t, "classify-multilabel"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, ml)
	if ml.scoring != ScoringSigmoid {
		t.Fatalf("multi-label model scores with %s", ml.scoring)
	}
	ctx := context.Background()
	res, err := ml.Classify(ctx, []string{"football score win"}, ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, s := range res.Results[0] {
		sum += s.Score
	}
	if len(res.Results[0]) != 4 || math.Abs(sum-1) < 1e-3 {
		t.Fatalf("sigmoid scores should not sum to 1: %+v", res.Results[0])
	}
	soft, err := ml.Classify(ctx, []string{"football score win"}, ClassifyOptions{Function: ScoringSoftmax, TopK: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(soft.Results[0]) != 2 || soft.Results[0][0].Score < soft.Results[0][1].Score {
		t.Fatalf("top 2 softmax: %+v", soft.Results[0])
	}
	if _, err := ml.Classify(ctx, []string{"x"}, ClassifyOptions{Function: "relu"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("unknown function: %v", err)
	}
	if _, err := ml.Classify(ctx, nil, ClassifyOptions{}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("no texts: %v", err)
	}
}

type zeroShotGolden struct {
	Texts []string `json:"texts"`
	Cases []struct {
		CandidateLabels    []string `json:"candidate_labels"`
		MultiLabel         bool     `json:"multi_label"`
		HypothesisTemplate string   `json:"hypothesis_template"`
		Results            []struct {
			Sequence string    `json:"sequence"`
			Labels   []string  `json:"labels"`
			Scores   []float64 `json:"scores"`
		} `json:"results"`
	} `json:"cases"`
}

func TestZeroShotMatchesTransformersJS(t *testing.T) {
	var g zeroShotGolden
	readGolden(t, "zeroshot.json", &g)
	z, err := LoadZeroShot(modelDir(t, "nli"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, z)
	worst, checked := 0.0, 0
	for _, c := range g.Cases {
		res, err := z.Classify(context.Background(), g.Texts, c.CandidateLabels,
			ZeroShotOptions{HypothesisTemplate: c.HypothesisTemplate, MultiLabel: c.MultiLabel})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.Results {
			got := res.Results[i]
			if got.Sequence != want.Sequence || strings.Join(got.Labels, ",") != strings.Join(want.Labels, ",") {
				t.Errorf("labels %v multi=%v text %d: %v, transformers.js %v", c.CandidateLabels, c.MultiLabel, i, got.Labels, want.Labels)
				continue
			}
			for j := range want.Scores {
				d := math.Abs(got.Scores[j] - want.Scores[j])
				worst = math.Max(worst, d)
				checked++
				if d > 1e-5 {
					t.Errorf("labels %v multi=%v text %d %s: %.7f vs %.7f", c.CandidateLabels, c.MultiLabel, i, got.Labels[j], got.Scores[j], want.Scores[j])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("nothing compared")
	}
	t.Logf("zero-shot: %d scores, same label order, max abs diff %.3g", checked, worst)
}

func TestZeroShotBadInput(t *testing.T) {
	opts := testOptions(t)
	z, err := LoadZeroShot(modelDir(t, "nli"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, z)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"no labels":   func() error { _, err := z.Classify(ctx, []string{"x"}, nil, ZeroShotOptions{}); return err },
		"empty label": func() error { _, err := z.Classify(ctx, []string{"x"}, []string{""}, ZeroShotOptions{}); return err },
		"no {}": func() error {
			_, err := z.Classify(ctx, []string{"x"}, []string{"a"}, ZeroShotOptions{HypothesisTemplate: "about"})
			return err
		},
		"empty text": func() error { _, err := z.Classify(ctx, []string{""}, []string{"a"}, ZeroShotOptions{}); return err },
	} {
		if err := call(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	// A sentiment model is not an NLI model.
	if _, err := LoadZeroShot(modelDir(t, "classify"), opts); !errors.Is(err, ErrWrongModel) {
		t.Fatalf("zero-shot on a sentiment model: %v", err)
	}
}

func TestRerankMatchesCrossEncoder(t *testing.T) {
	var g struct {
		Cases []struct {
			Query     string    `json:"query"`
			Documents []string  `json:"documents"`
			Logits    []float64 `json:"logits"`
			Scores    []float64 `json:"scores"`
		} `json:"cases"`
	}
	readGolden(t, "rerank.json", &g)
	r, err := LoadReranker(modelDir(t, "rerank"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, r)
	worst := 0.0
	for _, c := range g.Cases {
		res, err := r.Rerank(context.Background(), c.Query, c.Documents, RerankOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != len(c.Documents) {
			t.Fatalf("%d results for %d documents", len(res.Results), len(c.Documents))
		}
		for i, s := range res.Results {
			d := math.Abs(s.Score - c.Scores[s.Index])
			worst = math.Max(worst, d)
			if d > 1e-5 {
				t.Errorf("%q doc %d: %.7f vs %.7f", c.Query, s.Index, s.Score, c.Scores[s.Index])
			}
			if i > 0 && c.Scores[res.Results[i-1].Index] < c.Scores[s.Index] {
				t.Errorf("%q: result %d out of order", c.Query, i)
			}
		}
		raw, err := r.Rerank(context.Background(), c.Query, c.Documents, RerankOptions{TopN: 2, RawScores: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(raw.Results) != 2 || raw.Results[0].Index != res.Results[0].Index || math.Abs(raw.Results[0].Score-c.Logits[raw.Results[0].Index]) > 1e-5 {
			t.Errorf("%q top_n 2 raw: %+v", c.Query, raw.Results)
		}
	}
	t.Logf("rerank: relevance scores vs transformers.js cross-encoder logits, max abs diff %.3g", worst)
}

func TestWrongModelForTask(t *testing.T) {
	opts := testOptions(t)
	cases := []struct {
		task  Task
		model string
	}{
		{TaskEmbed, "classify"},       // logits, no last_hidden_state
		{TaskClassify, "embed-mean"},  // last_hidden_state, no logits
		{TaskRerank, "classify"},      // three labels, not one relevance logit
		{TaskSummarize, "embed-mean"}, // no encoder_model.onnx
		{TaskZeroShot, "rerank"},      // no entailment label
	}
	for _, c := range cases {
		p, err := Load(c.task, modelDir(t, c.model), opts)
		if !errors.Is(err, ErrWrongModel) || p != nil {
			t.Errorf("%s on %s: %v (pipeline %v), want ErrWrongModel", c.task, c.model, err, p)
		}
	}
	if _, err := ParseTask("translate"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown task: %v", err)
	}
}

func TestCorruptModel(t *testing.T) {
	src := modelDir(t, "classify")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "onnx", "model.onnx"), []byte("\x08\x07garbage, not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadClassifier(dir, testOptions(t))
	if err == nil || !strings.Contains(err.Error(), "not a loadable ONNX model") {
		t.Fatalf("corrupt model: %v", err)
	}
	if errors.Is(err, ErrWrongModel) || errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a corrupt file is a server-side failure, got %v", err)
	}
	if _, err := LoadEmbedder(filepath.Join(dir, "absent"), testOptions(t)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing folder: %v", err)
	}
}
