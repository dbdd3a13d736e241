package pipelines

import (
	"context"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// The summarization option and result types are backends'. Unset options
// (nil or zero) take the model's generation_config.json, then
// transformers.js's defaults (max_length 20, greedy search).
type (
	SummarizeOptions = backends.SummarizeOptions
	TokenEvent       = backends.TokenEvent
	Summary          = backends.Summary
	SummarizeResult  = backends.SummarizeResult
)

// Summarizer is a summarization pipeline over an encoder-decoder model.
type Summarizer struct {
	m   *seq2seq
	gen generationConfig
}

// LoadSummarizer loads an encoder-decoder model folder: onnx/encoder_model.onnx and
// onnx/decoder_model_merged.onnx (or, without it, onnx/decoder_model.onnx), with
// settings from config.json and generation_config.json.
func LoadSummarizer(dir string, opts Options) (*Summarizer, error) {
	files, err := loadFiles(dir)
	if err != nil {
		return nil, err
	}
	gen, err := readGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	m, err := loadSeq2Seq(files, opts)
	if err != nil {
		return nil, err
	}
	s := &Summarizer{m: m, gen: gen}
	if _, err := s.settings(SummarizeOptions{}); err != nil {
		return nil, closeAfterSeq(m, fmt.Errorf("pipelines: %s: %w: %w", dir, ErrWrongModel, err))
	}
	return s, nil
}

func closeAfterSeq(m *seq2seq, err error) error {
	if cerr := m.close(); cerr != nil {
		return fmt.Errorf("%w (and closing: %v)", err, cerr)
	}
	return err
}

// settings resolves the generation settings of a call.
func (s *Summarizer) settings(o SummarizeOptions) (*genSettings, error) {
	g := s.gen
	gs := &genSettings{maxLength: 20, numBeams: 1, lengthPenalty: 1}
	switch {
	case g.DecoderStartTokenID != nil:
		gs.start = *g.DecoderStartTokenID
	case g.BOSTokenID != nil:
		gs.start = *g.BOSTokenID
	default:
		return nil, fmt.Errorf("no decoder_start_token_id or bos_token_id in config.json or generation_config.json")
	}
	var err error
	if gs.eos, err = ids(g.EOSTokenID); err != nil {
		return nil, err
	}
	if g.PadTokenID != nil {
		gs.pad = *g.PadTokenID
	}
	if g.MaxLength != nil {
		gs.maxLength = *g.MaxLength
	}
	if g.MaxNewTokens != nil {
		gs.maxLength = 1 + *g.MaxNewTokens
	}
	if g.MinLength != nil {
		gs.minLength = *g.MinLength
	}
	if g.MinNewTokens != nil {
		gs.minNewTokens = *g.MinNewTokens
	}
	if g.NumBeams != nil {
		gs.numBeams = *g.NumBeams
	}
	if g.LengthPenalty != nil {
		gs.lengthPenalty = *g.LengthPenalty
	}
	if gs.early, err = earlyStopping(g.EarlyStopping); err != nil {
		return nil, err
	}
	if g.NoRepeatNgramSize != nil {
		gs.noRepeat = *g.NoRepeatNgramSize
	}
	gs.forcedBOS = g.ForcedBOSTokenID
	if gs.forcedEOS, err = ids(g.ForcedEOSTokenID); err != nil {
		return nil, err
	}

	if o.MaxNewTokens < 0 || o.NumBeams < 0 {
		return nil, fmt.Errorf("max_new_tokens and num_beams must not be negative: %w", ErrInvalidInput)
	}
	if o.NumBeams > MaxNumBeams {
		return nil, fmt.Errorf("num_beams %d is more than the %d allowed: %w", o.NumBeams, MaxNumBeams, ErrInvalidInput)
	}
	if o.MaxNewTokens > MaxNewTokens || (o.MinNewTokens != nil && *o.MinNewTokens > MaxNewTokens) {
		return nil, fmt.Errorf("max_new_tokens and min_new_tokens must be at most the %d allowed: %w", MaxNewTokens, ErrInvalidInput)
	}
	// A model's own settings are held to the same bounds.
	gs.numBeams = min(gs.numBeams, MaxNumBeams)
	gs.maxLength = min(gs.maxLength, 1+MaxNewTokens)
	if o.MaxNewTokens > 0 {
		gs.maxLength = 1 + o.MaxNewTokens
	}
	if o.MinNewTokens != nil {
		gs.minNewTokens = *o.MinNewTokens
	}
	if o.NumBeams > 0 {
		gs.numBeams = o.NumBeams
	}
	if o.LengthPenalty != nil {
		gs.lengthPenalty = *o.LengthPenalty
	}
	if o.EarlyStopping != EarlyStoppingDefault {
		gs.early = o.EarlyStopping
	}
	if o.NoRepeatNgramSize != nil {
		gs.noRepeat = *o.NoRepeatNgramSize
	}
	if gs.minNewTokens < 0 || gs.noRepeat < 0 || gs.numBeams < 1 || gs.maxLength < 2 {
		return nil, fmt.Errorf("min_new_tokens, no_repeat_ngram_size must be >= 0, num_beams >= 1, max_new_tokens >= 1: %w", ErrInvalidInput)
	}
	if o.OnToken != nil && gs.numBeams > 1 {
		return nil, fmt.Errorf("streaming needs greedy search (num_beams 1): %w", ErrInvalidInput)
	}
	// The decoder's position table bounds the length (transformers.js would fail).
	if p := s.m.files.config.MaxPositionEmbeddings; p > 0 && gs.maxLength > p {
		gs.maxLength = p
	}
	vocab := int64(s.m.files.tok.VocabSize())
	for _, t := range append(append([]int64{gs.start}, gs.eos...), gs.forcedEOS...) {
		if t < 0 || t >= vocab {
			return nil, fmt.Errorf("token id %d outside the vocabulary", t)
		}
	}
	return gs, nil
}

// Summarize generates a summary of each text. The texts are encoded in one padded
// batch and decoded together (texts × beams rows), in groups of texts when there
// are more rows than MaxDecoderRows; texts longer than the model's length are
// truncated, not refused.
func (s *Summarizer) Summarize(ctx context.Context, texts []string, opts SummarizeOptions) (SummarizeResult, error) {
	if err := checkTexts(texts); err != nil {
		return SummarizeResult{}, err
	}
	if err := checkCount("input texts", len(texts), MaxSummarizeInputs); err != nil {
		return SummarizeResult{}, err
	}
	gs, err := s.settings(opts)
	if err != nil {
		return SummarizeResult{}, fmt.Errorf("pipelines: %w", err)
	}
	ctx = tokenizer.WithRegexBudget(ctx) // one regex budget for all the texts
	group := max(1, MaxDecoderRows/gs.numBeams)
	var u usage
	sums := make([]Summary, 0, len(texts))
	for from := 0; from < len(texts); from += group {
		to := min(from+group, len(texts))
		part, err := s.summarizeGroup(ctx, gs, texts[from:to], from, opts.OnToken, &u)
		if err != nil {
			return SummarizeResult{}, err
		}
		sums = append(sums, part...)
	}
	res := SummarizeResult{Summaries: sums, InputTokens: u.tokens, Truncated: u.truncated, Device: s.Device()}
	for i := range sums {
		sums[i].Text = s.m.files.tok.Decode(sums[i].TokenIDs, true)
		res.OutputTokens += len(sums[i].TokenIDs)
		if sums[i].FinishReason == "stop" || len(gs.forcedEOS) > 0 {
			res.OutputTokens++ // the EOS was generated too (forced at the length limit)
		}
	}
	return res, nil
}

// summarizeGroup encodes and decodes texts together; first is the index of
// texts[0] in the call, which token events carry.
func (s *Summarizer) summarizeGroup(ctx context.Context, gs *genSettings, texts []string, first int, onToken func(TokenEvent) error, u *usage) ([]Summary, error) {
	encs := make([]*tokenizer.Encoding, len(texts))
	for i, t := range texts {
		var err error
		if encs[i], err = s.m.files.tok.EncodeContext(ctx, t, tokenizer.WithTruncation(s.m.files.maxTokens())); err != nil {
			return nil, fmt.Errorf("pipelines: %w", err)
		}
		u.add(encs[i])
	}
	hidden, mask, err := s.m.encode(ctx, encs)
	if err != nil {
		return nil, err
	}
	if gs.numBeams > 1 {
		return s.beam(ctx, gs, hidden, mask)
	}
	if onToken != nil && first > 0 {
		inner := onToken
		onToken = func(ev TokenEvent) error {
			ev.Index += first
			return inner(ev)
		}
	}
	return s.greedy(ctx, gs, hidden, mask, onToken)
}

// finishedSummary builds the Summary of a finished decoder sequence.
func finishedSummary(seq []int64, gs *genSettings) Summary {
	out := Summary{TokenIDs: append([]int64(nil), seq[1:]...), FinishReason: "length"}
	if n := len(out.TokenIDs); n > 0 && gs.isEOS(out.TokenIDs[n-1]) {
		out.TokenIDs = out.TokenIDs[:n-1]
		out.FinishReason = gs.eosFinish(len(seq))
	}
	return out
}

// eosFinish is the finish reason of a sequence of n tokens (start token and
// EOS included) that ended with an EOS: "length" when it was the EOS that
// forced_eos_token_id puts at the length limit (the text was cut), else
// "stop".
func (g *genSettings) eosFinish(n int) string {
	if len(g.forcedEOS) > 0 && n >= g.maxLength {
		return "length"
	}
	return "stop"
}

// streamDelta is the text the newest token adds to a summary.
func streamDelta(prev, full string) string {
	if strings.HasPrefix(full, prev) {
		return full[len(prev):]
	}
	return ""
}

// Device is where the model runs: "cpu" or "cuda:N" (the decoder's device).
func (s *Summarizer) Device() string { return s.m.decoder.Device() }

// FallbackReason says why a pipeline asked to use the GPU runs on CPU.
func (s *Summarizer) FallbackReason() string {
	if r := s.m.encoder.FallbackReason(); r != "" {
		return r
	}
	return s.m.decoder.FallbackReason()
}

// Size is the total size of the model folder's files in bytes.
func (s *Summarizer) Size() int64 { return s.m.files.size }

// Task is TaskSummarize.
func (s *Summarizer) Task() Task { return TaskSummarize }

// UsesCache says whether decoding keeps a KV cache (a merged decoder, or the
// split decoder_model + decoder_with_past_model layout).
func (s *Summarizer) UsesCache() bool { return s.m.cached() }

// Close releases the models.
func (s *Summarizer) Close() error { return s.m.close() }
