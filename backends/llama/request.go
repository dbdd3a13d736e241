package llama

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the engine. ContextLengthError is a type; the rest are sentinels
// to test with errors.Is.
var (
	// ErrClosed: the model was closed before or while the request ran.
	ErrClosed = errors.New("llama: model closed")
	// ErrBusy: every slot is in use and the waiting queue is full.
	ErrBusy = errors.New("llama: too many requests waiting for a slot")
	// ErrInvalidRequest: the request's parameters are out of range.
	ErrInvalidRequest = errors.New("llama: invalid request")
	// ErrInvalidModel: the file is not a GGUF model llama.cpp can load.
	ErrInvalidModel = errors.New("llama: invalid model file")
	// ErrNoChatTemplate: the model has no tokenizer.chat_template.
	ErrNoChatTemplate = errors.New("llama: model has no chat template")
	// ErrDecode: llama_decode failed.
	ErrDecode = errors.New("llama: decode failed")
)

// ContextLengthError says that the prompt and the requested completion do not
// fit in the context of one sequence. MaxTokens is 0 when the request left it
// unset (the prompt alone fills the context).
type ContextLengthError struct {
	PromptTokens int
	MaxTokens    int
	ContextSize  int
}

func (e *ContextLengthError) Error() string {
	if e.MaxTokens == 0 {
		return fmt.Sprintf("llama: the prompt has %d tokens, which leaves no room for a completion in the context of %d tokens",
			e.PromptTokens, e.ContextSize)
	}
	return fmt.Sprintf("llama: the prompt (%d tokens) plus max_tokens (%d) is %d tokens, more than the context of %d tokens",
		e.PromptTokens, e.MaxTokens, e.PromptTokens+e.MaxTokens, e.ContextSize)
}

// Sampling selects how each next token is chosen. The zero value is greedy.
type Sampling struct {
	// Temperature 0 is greedy (argmax); above 0 the token is drawn at random
	// after top-k, top-p and min-p filtering.
	Temperature float32
	TopK        int     // 0 = off
	TopP        float32 // 0 or 1 = off
	MinP        float32 // 0 = off
	// Seed makes random sampling reproducible; nil draws a random seed.
	Seed *int64
	// PresencePenalty and FrequencyPenalty follow OpenAI (-2..2, 0 = off);
	// RepeatPenalty is llama.cpp's multiplicative penalty (0 or 1 = off).
	// They apply to the tokens generated so far (not the prompt), over the
	// last PenaltyLastN of them (0 = all).
	PresencePenalty  float32
	FrequencyPenalty float32
	RepeatPenalty    float32
	PenaltyLastN     int
	// LogitBias adds a bias to a token's logit (OpenAI: -100..100, where
	// -100 bans the token and 100 all but forces it).
	LogitBias map[int32]float32
}

// Request is one generation: prompt tokens in, a stream of events out.
type Request struct {
	Prompt []int32
	// MaxTokens bounds the completion; 0 means what is left of the context.
	MaxTokens int
	Sampling  Sampling
	// Stop strings end the completion; the matched text is never emitted,
	// even when it arrives split across tokens.
	Stop []string
}

// FinishReason says why a generation ended.
type FinishReason string

const (
	FinishStop      FinishReason = "stop"      // end-of-generation token or a stop string
	FinishLength    FinishReason = "length"    // MaxTokens reached
	FinishCancelled FinishReason = "cancelled" // the request's context was cancelled
	FinishError     FinishReason = "error"     // see Event.Err
)

// Usage counts the tokens of one generation. CompletionTokens counts every
// sampled token, the end-of-generation token included. CachedTokens is the
// prompt prefix whose KV was reused from the slot's previous request.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
}

// Event is one item of a generation's stream. Every sampled token except an
// end-of-generation token gives one event with Token set and the text it
// releases (possibly empty: text is held while it could be the start of a
// stop string or is an incomplete UTF-8 sequence). The last event has Done
// set, Token -1, the rest of the held text, the finish reason and the usage.
type Event struct {
	Token  int32
	Text   string
	Done   bool
	Finish FinishReason
	Err    error
	Usage  Usage
}

// validate checks r against the model and returns the completion budget.
func (r *Request) validate(nVocab, ctxSize int) (int, error) {
	var errs []error
	if len(r.Prompt) == 0 {
		errs = append(errs, errors.New("the prompt is empty"))
	}
	for i, t := range r.Prompt {
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
