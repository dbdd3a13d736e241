package pipelines

import (
	"fmt"

	"github.com/modeld/modeld/backends"
)

// Bounds of one call, checked before any text is tokenized: a call over one
// fails with ErrInvalidInput. They are backends' (api/core/limits.go refuses the
// same requests earlier, naming the field), but for MaxDecoderRows, which is
// this package's own.
const (
	MaxEmbedInputs     = backends.MaxEmbedInputs
	MaxClassifyInputs  = backends.MaxClassifyInputs
	MaxCandidateLabels = backends.MaxCandidateLabels
	MaxZeroShotPairs   = backends.MaxZeroShotPairs
	MaxRerankDocuments = backends.MaxRerankDocuments
	MaxSummarizeInputs = backends.MaxSummarizeInputs
	MaxNumBeams        = backends.MaxNumBeams
	MaxNewTokens       = backends.MaxNewTokens
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

// quoteInput is %q of caller input, clipped (backends.QuoteInput).
func quoteInput(s string) string { return backends.QuoteInput(s) }
