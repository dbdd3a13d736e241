package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// Errors of the engine. The request, event and error types are those of
// package backends (the aliases below keep the engine's names); ErrDecode
// and ErrNotInitialized are the engine's own, defined in package wire so
// that they survive the runner socket.
var (
	// ErrClosed: the model was closed before or while the request ran.
	ErrClosed = backends.ErrClosed
	// ErrBusy: every slot is in use and the waiting queue is full. The
	// error returned is a *backends.BusyError that matches it.
	ErrBusy = backends.ErrBusy
	// ErrInvalidRequest: the request's parameters are out of range.
	ErrInvalidRequest = backends.ErrInvalidRequest
	// ErrInvalidModel: the file is not a GGUF model llama.cpp can load.
	ErrInvalidModel = backends.ErrInvalidModel
	// ErrNoChatTemplate: the model has no tokenizer.chat_template.
	ErrNoChatTemplate = backends.ErrNoChatTemplate
	// ErrDecode: llama_decode failed.
	ErrDecode = wire.ErrDecode
)

// The engine's settings and descriptions, which cross the runner socket.
type (
	Options = wire.Options
	Info    = wire.Info
	Stats   = wire.Stats
)

// Defaults of Options.
const (
	DefaultSlots      = wire.DefaultSlots
	DefaultContextCap = wire.DefaultContextCap
	DefaultBatchSize  = wire.DefaultBatchSize
	DefaultLookup     = wire.DefaultLookup
)

var (
	_ backends.Generator     = (*Model)(nil)
	_ backends.Tokenizer     = (*Model)(nil)
	_ backends.ChatTokenizer = (*Model)(nil)
)

// ContextLengthError says that the prompt and the requested completion do not
// fit in the context of one sequence.
type ContextLengthError = backends.ContextOverflowError

// The request model of package backends.
type (
	Sampling     = backends.Sampling
	Request      = backends.Request
	FinishReason = backends.FinishReason
	Usage        = backends.Usage
	Event        = backends.Event
	Logprobs     = backends.Logprobs
)

// Finish reasons.
const (
	FinishStop      = backends.FinishStop
	FinishLength    = backends.FinishLength
	FinishCancelled = backends.FinishCancelled
	FinishError     = backends.FinishError
)

// validate checks r against the model and returns the completion budget.
// A top_logprobs out of range is a *backends.BadRequestError naming it (n
// against the slots: checkChoices). With images, the prompt's
// backends.ImageToken ids are image tokens (newMediaPrompt checks them).
func validate(r *Request, nVocab, ctxSize int, images bool) (int, error) {
	if err := checkLogprobs(r); err != nil {
		return 0, err
	}
	var errs []error
	if len(r.Prompt) == 0 {
		errs = append(errs, errors.New("the prompt is empty"))
	}
	for i, t := range r.Prompt {
		if images && t == backends.ImageToken {
			continue
		}
		if t < 0 || int(t) >= nVocab {
			errs = append(errs, fmt.Errorf("prompt token %d at position %d is outside the vocabulary of %d", t, i, nVocab))
			break
		}
	}
	if r.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max_tokens %d is negative", r.MaxTokens))
	}
	s := r.Sampling
	if s.Temperature < 0 {
		errs = append(errs, fmt.Errorf("temperature %g is negative", s.Temperature))
	}
	if s.TopP < 0 || s.TopP > 1 {
		errs = append(errs, fmt.Errorf("top_p %g is outside [0, 1]", s.TopP))
	}
	if s.MinP < 0 || s.MinP > 1 {
		errs = append(errs, fmt.Errorf("min_p %g is outside [0, 1]", s.MinP))
	}
	if s.TopK < 0 {
		errs = append(errs, fmt.Errorf("top_k %d is negative", s.TopK))
	}
	if s.RepeatPenalty < 0 {
		errs = append(errs, fmt.Errorf("repeat penalty %g is negative", s.RepeatPenalty))
	}
	if s.PenaltyLastN < 0 {
		errs = append(errs, fmt.Errorf("penalty window %d is negative", s.PenaltyLastN))
	}
	for t := range s.LogitBias {
		if t < 0 || int(t) >= nVocab {
			errs = append(errs, fmt.Errorf("logit_bias token %d is outside the vocabulary of %d", t, nVocab))
			break
		}
	}
	for _, st := range r.Stop {
		if strings.ContainsRune(st, 0) {
			errs = append(errs, errors.New("a stop string holds a NUL byte"))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	left := ctxSize - len(r.Prompt)
	if r.MaxTokens == 0 {
		if left <= 0 {
			return 0, &ContextLengthError{PromptTokens: len(r.Prompt), ContextSize: ctxSize}
		}
		return left, nil
	}
	if r.MaxTokens > left {
		return 0, &ContextLengthError{PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens, ContextSize: ctxSize}
	}
	return r.MaxTokens, nil
}
