package pipelines

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds of one call, checked before any text is tokenized: a call over one
// fails with ErrInvalidInput. They keep a small request from asking for an
// unbounded amount of memory (texts × labels pairs, texts × beams decoder
// rows). api/limits.go refuses the same requests earlier, naming the field.
const (
	// MaxEmbedInputs bounds the texts of one Embed call (OpenAI's limit per
	// embeddings request).
	MaxEmbedInputs = 2048
	// MaxClassifyInputs bounds the texts of one Classify call.
	MaxClassifyInputs = 2048
	// MaxCandidateLabels bounds the labels of one zero-shot call, and
	// MaxZeroShotPairs its texts × labels (each pair is one sequence through
	// the model).
	MaxCandidateLabels = 1024
	MaxZeroShotPairs   = 4096
	// MaxRerankDocuments bounds the documents of one Rerank call.
	MaxRerankDocuments = 1024
	// MaxSummarizeInputs bounds the texts of one Summarize call.
	MaxSummarizeInputs = 64
	// MaxNumBeams bounds num_beams; a model's generation_config.json asking
	// for more is held to it.
	MaxNumBeams = 16
	// MaxNewTokens bounds max_new_tokens and min_new_tokens (the decoder's
	// position table usually bounds the length far below it).
	MaxNewTokens = 16384
	// MaxDecoderRows bounds the sequences decoded together (texts × beams):
	// a larger call is decoded in groups of texts, one after the other.
	MaxDecoderRows = 64
)

// checkCount refuses n items of what over limit.
func checkCount(what string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("pipelines: %d %s, more than the %d allowed: %w", n, what, limit, ErrInvalidInput)
	}
	return nil
}

// maxQuoted bounds caller input quoted in an error message.
const maxQuoted = 96

// quoteInput is %q of caller input, cut to maxQuoted bytes (marked "…").
func quoteInput(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}
