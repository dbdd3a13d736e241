package pipelines

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type genOptionsJSON struct {
	MaxNewTokens      *int     `json:"max_new_tokens"`
	MinNewTokens      *int     `json:"min_new_tokens"`
	NoRepeatNgramSize *int     `json:"no_repeat_ngram_size"`
	NumBeams          int      `json:"num_beams"`
	LengthPenalty     *float64 `json:"length_penalty"`
	EarlyStopping     any      `json:"early_stopping"`
}

func (o genOptionsJSON) options(t *testing.T) SummarizeOptions {
	t.Helper()
	so := SummarizeOptions{MinNewTokens: o.MinNewTokens, NoRepeatNgramSize: o.NoRepeatNgramSize, NumBeams: o.NumBeams, LengthPenalty: o.LengthPenalty}
	if o.MaxNewTokens != nil {
		so.MaxNewTokens = *o.MaxNewTokens
	}
	switch v := o.EarlyStopping.(type) {
	case nil:
	case bool:
		so.EarlyStopping = EarlyStoppingFalse
		if v {
			so.EarlyStopping = EarlyStoppingTrue
		}
	case string:
		var err error
		if so.EarlyStopping, err = ParseEarlyStopping(v); err != nil {
			t.Fatal(err)
		}
	}
	return so
}

type summarizeGolden struct {
	Version string   `json:"transformers_js"`
	Texts   []string `json:"texts"`
	Greedy  []struct {
		Options   genOptionsJSON `json:"options"`
		Sequences [][]int64      `json:"sequences"`
	} `json:"greedy"`
	SummaryText []string `json:"summary_text"`
	Beam        []struct {
		Options genOptionsJSON `json:"options"`
		Results []struct {
			IDs []int64 `json:"ids"`
			EOS bool    `json:"eos"`
		} `json:"results"`
	} `json:"beam"`
	TJSNumBeams3 [][]int64 `json:"transformers_js_generate_num_beams_3"`
}

// layoutCopy is the summarize model with only encoder_model.onnx and the
// decoder files given (as from: to, both under onnx/), so the summarizer
// loads that decoder layout.
func layoutCopy(t *testing.T, decoders map[string]string) string {
	t.Helper()
	src, err := filepath.Abs(modelDir(t, "summarize"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"onnx/encoder_model.onnx": "onnx/encoder_model.onnx"}
	for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		links[f] = f
	}
	for from, to := range decoders {
		links["onnx/"+from] = "onnx/" + to
	}
	for from, to := range links {
		if err := os.Symlink(filepath.Join(src, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// noCacheCopy is the summarize model without decoder_model_merged.onnx, so the
// summarizer runs onnx/decoder_model.onnx (no KV cache).
func noCacheCopy(t *testing.T) string {
	return layoutCopy(t, map[string]string{"decoder_model.onnx": "decoder_model.onnx"})
}

// finishReason is the finish_reason of a golden sequence (start token first)
// generated under opts: "stop" when it ended with the EOS before the length
// limit; "length" when the limit cut it, also where forced_eos_token_id put
// the EOS at the limit (the test model's generation_config has max_length
// 24 and forced_eos_token_id 3).
func finishReason(seq []int64, opts genOptionsJSON) string {
	limit := 24
	if opts.MaxNewTokens != nil {
		limit = 1 + *opts.MaxNewTokens
	}
	if seq[len(seq)-1] == 3 && len(seq) < limit {
		return "stop"
	}
	return "length"
}

func TestSummarizeMatchesTransformersJS(t *testing.T) {
	var g summarizeGolden
	readGolden(t, "summarize.json", &g)
	// transformers.js's own generate() with num_beams > 1 keeps one beam: its ids are
	// its greedy ids, which is why the beam goldens come from the reference search.
	if !slices.EqualFunc(g.TJSNumBeams3, g.Greedy[0].Sequences, slices.Equal[[]int64]) {
		t.Log("transformers.js generate(num_beams 3) no longer equals its greedy search: regenerate and revisit the beam goldens")
	}
	opts := testOptions(t)
	for _, variant := range []struct {
		name  string
		dir   string
		cache bool
	}{
		{"merged decoder with KV cache", modelDir(t, "summarize"), true},
		{"decoder without cache", noCacheCopy(t), false},
		{"decoder without cache named decoder_model_merged.onnx", layoutCopy(t, map[string]string{"decoder_model.onnx": "decoder_model_merged.onnx"}), false},
		{"decoder_model and decoder_with_past_model", layoutCopy(t, map[string]string{"decoder_model.onnx": "decoder_model.onnx", "decoder_with_past_model.onnx": "decoder_with_past_model.onnx"}), true},
	} {
		t.Run(variant.name, func(t *testing.T) {
			s, err := LoadSummarizer(variant.dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer closeP(t, s)
			if s.UsesCache() != variant.cache {
				t.Fatalf("UsesCache = %v", s.UsesCache())
			}
			ctx := context.Background()
			compared := 0
			for _, c := range g.Greedy {
				// All texts in one call: encoder batch with padding, rows leaving as they finish.
				res, err := s.Summarize(ctx, g.Texts, c.Options.options(t))
				if err != nil {
					t.Fatal(err)
				}
				for i, seq := range c.Sequences {
					want, reason := seq[1:], finishReason(seq, c.Options)
					if want[len(want)-1] == 3 {
						want = want[:len(want)-1]
					}
					got := res.Summaries[i]
					if !slices.Equal(got.TokenIDs, want) || got.FinishReason != reason {
						t.Errorf("greedy %+v text %d: %v (%s), transformers.js %v (%s)", c.Options, i, got.TokenIDs, got.FinishReason, want, reason)
					}
					compared++
				}
			}
			res, err := s.Summarize(ctx, g.Texts, SummarizeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range g.SummaryText {
				if res.Summaries[i].Text != want {
					t.Errorf("text %d summary %q, transformers.js %q", i, res.Summaries[i].Text, want)
				}
			}
			for _, c := range g.Beam {
				res, err := s.Summarize(ctx, g.Texts, c.Options.options(t))
				if err != nil {
					t.Fatal(err)
				}
				for i, want := range c.Results {
					got := res.Summaries[i]
					seq := append([]int64{2}, want.IDs...)
					if want.EOS {
						seq = append(seq, 3)
					}
					if !slices.Equal(got.TokenIDs, want.IDs) || got.FinishReason != finishReason(seq, c.Options) {
						t.Errorf("beam %+v text %d: %v (%s), reference %v (eos %v)", c.Options, i, got.TokenIDs, got.FinishReason, want.IDs, want.EOS)
					}
					compared++
				}
			}
			t.Logf("%s: %d token sequences identical to the goldens (transformers.js %s greedy, reference beam search)", variant.name, compared, g.Version)
		})
	}
}

func TestSummarizeOneByOneEqualsBatched(t *testing.T) {
	var g summarizeGolden
	readGolden(t, "summarize.json", &g)
	s, err := LoadSummarizer(modelDir(t, "summarize"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	ctx := context.Background()
	three := 3
	opts := SummarizeOptions{NumBeams: 3, NoRepeatNgramSize: &three}
	batched, err := s.Summarize(ctx, g.Texts, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range g.Texts {
		one, err := s.Summarize(ctx, []string{text}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one.Summaries[0].TokenIDs, batched.Summaries[i].TokenIDs) {
			t.Errorf("text %d alone %v, in a batch %v", i, one.Summaries[0].TokenIDs, batched.Summaries[i].TokenIDs)
		}
	}
	if batched.Device != "cpu" || batched.InputTokens == 0 || batched.OutputTokens == 0 {
		t.Fatalf("result %+v", batched)
	}
}

func TestSummarizeStreaming(t *testing.T) {
	s, err := LoadSummarizer(modelDir(t, "summarize"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	ctx := context.Background()
	texts := []string{"the quick brown fox jumps over the lazy dog", "hello world"}
	var events []TokenEvent
	res, err := s.Summarize(ctx, texts, SummarizeOptions{OnToken: func(ev TokenEvent) error {
		events = append(events, ev)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, sum := range res.Summaries {
		var ids []int64
		var text strings.Builder
		for _, ev := range events {
			if ev.Index == i {
				ids = append(ids, ev.TokenID)
				text.WriteString(ev.Text)
			}
		}
		if sum.FinishReason == "stop" {
			ids = ids[:len(ids)-1] // the streamed EOS
		}
		if !slices.Equal(ids, sum.TokenIDs) || text.String() != sum.Text {
			t.Errorf("text %d: streamed %v %q, result %v %q", i, ids, text.String(), sum.TokenIDs, sum.Text)
		}
	}
	stop := errors.New("client went away")
	n := 0
	_, err = s.Summarize(ctx, texts, SummarizeOptions{OnToken: func(TokenEvent) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("callback error: %v after %d tokens", err, n)
	}
	if _, err := s.Summarize(ctx, texts, SummarizeOptions{NumBeams: 2, OnToken: func(TokenEvent) error { return nil }}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("streaming beam search: %v", err)
	}
}

func TestSummarizeBadInput(t *testing.T) {
	s, err := LoadSummarizer(modelDir(t, "summarize"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, s)
	ctx := context.Background()
	if _, err := s.Summarize(ctx, []string{""}, SummarizeOptions{}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("empty text: %v", err)
	}
	neg := -1
	if _, err := s.Summarize(ctx, []string{"x"}, SummarizeOptions{NoRepeatNgramSize: &neg}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("negative no_repeat_ngram_size: %v", err)
	}
	long := strings.Repeat("paris is the capital of france. ", 3200)[:100000]
	res, err := s.Summarize(ctx, []string{long}, SummarizeOptions{MaxNewTokens: 200})
	if err != nil {
		t.Fatalf("100k characters: %v", err)
	}
	if res.Truncated != 1 || res.InputTokens != 64 {
		t.Fatalf("truncated %d input tokens %d", res.Truncated, res.InputTokens)
	}
	// max_new_tokens beyond the position table is capped (64 positions, start token included).
	if n := len(res.Summaries[0].TokenIDs); n > 63 {
		t.Fatalf("%d tokens generated past the decoder's 64 positions", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Summarize(cancelled, []string{"x"}, SummarizeOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
