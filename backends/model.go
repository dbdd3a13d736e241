package backends

import (
	"context"
)

// DefaultContextCap is the largest context a model gets when the
// configuration sets none (the model's trained context when smaller).
const DefaultContextCap = 8192

// Model is a loaded model: the small core every backend implements. What a
// model can do beyond that is an optional capability (Generator, Tokenizer,
// Embedder, Classifier, ZeroShotClassifier, Reranker, Summarizer), found with
// a type assertion; a caller that needs one the model lacks refuses the
// request, it never guesses.
type Model interface {
	Info() Info
	Close() error
}

// Info describes a loaded model in the terms every backend shares.
type Info struct {
	Backend string // the registry name the model was loaded with
	Path    string // the file or directory it was loaded from
	Arch    string // e.g. "llama", "bert"
	Task    string // what it serves: "chat", "embed", "classify", ...
	// ContextSize is the number of tokens one sequence may hold (prompt and
	// completion together); 0 when the backend has no such limit.
	ContextSize int
	// Slots is how many requests it runs at once.
	Slots int
	// Device is where it runs, in probe's device vocabulary: "cpu",
	// "cuda:N", "vulkan:N" or "metal:0".
	Device string
	// GPUFallback says why a load meant for a GPU runs on the CPU ("" when it
	// did not fall back).
	GPUFallback string
	// ChatTemplate reports whether the model renders chat messages itself.
	ChatTemplate bool
	// Vision reports whether chat messages may carry images (a GGUF model
	// loaded with its multimodal projector); ImageInputError otherwise.
	Vision bool
}

// Generator generates text: chat and completions. The stream ends with one
// event whose Done is set; it is closed after that event. The generation
// stops when ctx is cancelled (the last event then says FinishCancelled).
// A request field the backend cannot honour is a *BadRequestError naming it.
type Generator interface {
	Generate(ctx context.Context, req Request) (<-chan Event, error)
}

// Tokenizer is a model that tokenizes text and renders chat messages into
// its prompt format. The handlers use it to measure and check a prompt
// before generating.
type Tokenizer interface {
	TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error)
	DetokenizeContext(ctx context.Context, tokens []int32, renderSpecial bool) (string, error)
	// ApplyChatTemplateContext renders msgs with the model's chat template;
	// ErrNoChatTemplate when it has none.
	ApplyChatTemplateContext(ctx context.Context, msgs []Message, addAssistant bool) (string, error)
}

// TextGenerator is a Generator that tokenizes a raw prompt (Request.Text,
// with its special tokens parsed and the vocabulary's added) in the same
// call as the generation, where its decoding runs. Handlers then hand it
// the text instead of tokenizing it first, which would cost a call and the
// tokens' round trip; the final event's usage counts the prompt's tokens,
// and a prompt too long for the context is a *ContextOverflowError from
// Generate, as it is for tokens.
type TextGenerator interface {
	Generator
	TokenizesText()
}

// ChatTokenizer is a Tokenizer that renders a conversation (and the tools
// offered, the template's tools variable) and tokenizes it in one step,
// giving exactly the prompt a generation of those messages sees. Text from
// the messages is tokenized as text: only the template's own markup gives
// control tokens, so content cannot forge a turn. Handlers prefer it to
// ApplyChatTemplateContext followed by TokenizeContext with special parsing.
type ChatTokenizer interface {
	ChatPromptContext(ctx context.Context, msgs []Message, tools []Tool, addAssistant bool) ([]int32, error)
}

// Infiller is a model whose vocabulary has fill-in-the-middle tokens: it
// gives the prompt that asks for the text between prefix and suffix, its
// own FIM tokens around them. prefix and suffix are tokenized as text, so
// they cannot forge control tokens. A model whose vocabulary lacks the
// tokens returns an error wrapping ErrNoInfill.
type Infiller interface {
	InfillPromptContext(ctx context.Context, prefix, suffix string) ([]int32, error)
}

// Holder is implemented by what wraps a loaded model (a cache instance that
// adds placement and accounting): Backend gives the model itself, whose
// capabilities a type assertion then finds.
type Holder interface {
	Backend() Model
}

// Unwrap returns the model v holds: v's Backend() when v is a Holder, else
// v itself when it is a Model; nil otherwise.
func Unwrap(v any) Model {
	if h, ok := v.(Holder); ok {
		return h.Backend()
	}
	if m, ok := v.(Model); ok {
		return m
	}
	return nil
}
