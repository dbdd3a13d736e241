package core

import (
	"fmt"
	"unicode/utf8"

	"github.com/modeld/modeld/backends"
)

// Request limits. Each is checked when the request is decoded, before the
// model is acquired (so before it is loaded) and before anything is
// tokenized; a request over one is a 400 whose param names the field.
// docs/API.md lists them under "Limits". The task pipelines enforce their
// own bounds for every caller (backends/tasks.go); the values here are
// those bounds, so the API refuses what the pipeline would, earlier and
// with the field named.
const (
	// MaxChatMessages bounds messages per chat request: a conversation of
	// more turns than this does not fit any context modeld gives anyway.
	MaxChatMessages = 4096
	// MaxStopSequences bounds stop strings per request (OpenAI allows 4,
	// llama.cpp's server any number), and MaxStopBytes the length of each:
	// every generated token is matched against each of them.
	MaxStopSequences = 16
	MaxStopBytes     = 256
	// MaxLogitBias bounds logit_bias entries.
	MaxLogitBias = 1024
	// MaxChoices bounds n, MaxTopLogprobs top_logprobs (OpenAI's limit) and
	// MaxTools the tools of a request (OpenAI's limit).
	MaxChoices     = 8
	MaxTopLogprobs = 20
	MaxTools       = 128
	// MaxEmbeddingInputs bounds inputs per embeddings request (OpenAI's own
	// limit), MaxClassifyInputs those per classification request.
	MaxEmbeddingInputs = backends.MaxEmbedInputs
	MaxClassifyInputs  = backends.MaxClassifyInputs
	// MaxCandidateLabels bounds zero-shot labels, and MaxZeroShotPairs the
	// texts × labels pairs one request runs through the model.
	MaxCandidateLabels = backends.MaxCandidateLabels
	MaxZeroShotPairs   = backends.MaxZeroShotPairs
	// MaxRerankDocuments bounds documents per rerank request.
	MaxRerankDocuments = backends.MaxRerankDocuments
	// MaxSummarizeInputs bounds texts per summarize request, MaxNumBeams
	// num_beams and MaxNewTokens max_new_tokens (and min_new_tokens). The
	// summarizer decodes at most pipelines.MaxDecoderRows texts × beams at
	// once and runs larger requests group by group.
	MaxSummarizeInputs = backends.MaxSummarizeInputs
	MaxNumBeams        = backends.MaxNumBeams
	MaxNewTokens       = backends.MaxNewTokens

	// MaxBytesPerToken is the most bytes of text one token is assumed to
	// stand for. A prompt of more than contextTokens × MaxBytesPerToken bytes
	// cannot fit in the context, whatever the vocabulary, so it is refused
	// (context_length_exceeded) without tokenizing it. Real vocabularies'
	// longest tokens (runs of spaces or punctuation) are far shorter, so a
	// prompt that might fit is never refused by this bound; the exact token
	// count decides.
	MaxBytesPerToken = 256
	// promptBodySlack is what a chat or completions body may hold besides
	// its prompt (sampling fields, ignored tool definitions, whitespace):
	// a body over 6 × MaxBytesPerToken × context + promptBodySlack bytes
	// cannot hold a prompt that fits (JSON spells a byte in at most 6, as
	// \u00XX), so it is refused from its length before it is decoded.
	promptBodySlack = 4 << 20

	// MaxQuoted bounds user input quoted in an error message (a model id, a
	// role, a label); longer input is cut and ends with "…".
	MaxQuoted = backends.MaxQuoted
	// MaxErrorMessage bounds any error message the API sends: longer ones
	// keep their start and end around "…", so an error that quotes input
	// from elsewhere still stays small.
	MaxErrorMessage = 2048
	// maxListedProblems bounds the problems one 400 lists; the rest are
	// counted.
	maxListedProblems = 8
)

// Clip cuts user input to backends.MaxQuoted bytes, marking the cut with "…".
func Clip(s string) string { return backends.Clip(s) }

// Quote is %q of user input, clipped.
func Quote(s string) string { return backends.QuoteInput(s) }

// ClipMessage bounds an error message to MaxErrorMessage bytes, keeping its
// start and end.
func ClipMessage(msg string) string {
	if len(msg) <= MaxErrorMessage {
		return msg
	}
	head, tail := MaxErrorMessage/2, MaxErrorMessage/2
	for head > 0 && !utf8.RuneStart(msg[head]) {
		head--
	}
	start := len(msg) - tail
	for start < len(msg) && !utf8.RuneStart(msg[start]) {
		start++
	}
	return msg[:head] + " … " + msg[start:]
}

// ContextCap is the largest context, in tokens, that any chat model of this
// daemon gets (a model's own trained context is used when smaller).
// PlanEnv is what checking a request needs besides the request: the
// largest context a model gets and the chat backend's grammar compiler
// (Options.Constraints).
type PlanEnv struct {
	ContextCap  int
	Constraints backends.Constrainer
}

// PlanEnv is the server's PlanEnv.
func (s *Core) PlanEnv() PlanEnv {
	return PlanEnv{ContextCap: s.ContextCap(), Constraints: s.Opt.Constraints}
}

func (s *Core) ContextCap() int {
	if s.Opt.ContextCap > 0 {
		return s.Opt.ContextCap
	}
	return backends.DefaultContextCap
}

// MinPromptTokens is the fewest tokens n bytes of prompt text can be.
func MinPromptTokens(n int) int { return (n + MaxBytesPerToken - 1) / MaxBytesPerToken }

// CheckPromptBytes refuses, without tokenizing, a prompt of n bytes that
// cannot fit with a completion of maxTokens (0: at least one token) in a
// context of ctx tokens. param names the field that holds the prompt.
func CheckPromptBytes(param string, n, maxTokens, ctx int) error {
	return CheckBytes(param, "the prompt has", n, maxTokens, ctx)
}

// CheckBytes is CheckPromptBytes for n bytes of what (the prompt, the
// tools) that the rendered prompt holds at least. The refusal is
// context_length_exceeded with n_prompt_tokens the least the prompt can be
// and n_ctx the context.
func CheckBytes(param, what string, n, maxTokens, ctx int) error {
	if ctx <= 0 {
		return nil
	}
	least := MinPromptTokens(n)
	if least+max(maxTokens, 1) <= ctx {
		return nil
	}
	e := BadRequest(param, "%s %d bytes, so at least %d tokens (a token is at most %d bytes here), which with max_tokens %d is more than the context of %d tokens; shorten it",
		what, n, least, MaxBytesPerToken, maxTokens, ctx)
	if maxTokens == 0 {
		e.Message = fmt.Sprintf("%s %d bytes, so at least %d tokens (a token is at most %d bytes here), which leaves no room for a completion in the context of %d tokens; shorten it",
			what, n, least, MaxBytesPerToken, ctx)
	}
	e.Code = "context_length_exceeded"
	e.NPromptTokens, e.NCtx = &least, &ctx
	return e
}

// toolBytesWhat is how a refusal of the tools' size names what it counted.
const toolBytesWhat = "the tools' names, descriptions and schema text have"

// CheckToolBytes refuses, before anything reads them, tools whose text
// alone (ToolPromptBytes) leaves no room for a completion in ctx tokens.
func CheckToolBytes(param string, tools []backends.Tool, ctx int) error {
	return CheckBytes(param, toolBytesWhat, ToolPromptBytes(tools), 0, ctx)
}

// checkChatBytes refuses, before anything is rendered, a chat whose
// messages (msgBytes) and tools (toolBytes, ToolPromptBytes) cannot fit
// with a completion of maxTokens in ctx tokens: on toolsParam when the
// tools alone leave no room for a completion, else on msgParam.
func checkChatBytes(msgParam string, msgBytes int, toolsParam string, toolBytes, maxTokens, ctx int) error {
	if err := CheckBytes(toolsParam, toolBytesWhat, toolBytes, 0, ctx); err != nil {
		return err
	}
	if toolBytes == 0 {
		return CheckPromptBytes(msgParam, msgBytes, maxTokens, ctx)
	}
	return CheckBytes(msgParam, fmt.Sprintf("the messages (%d bytes) and the tools (%d bytes) have", msgBytes, toolBytes), msgBytes+toolBytes, maxTokens, ctx)
}

// ToolPromptBytes is what the early bound counts of tools, without
// rendering or decoding them: each tool's name and description, and the
// text of its parameters schema — every object key and string value, an
// escape sequence counted as one byte — but none of the JSON's
// punctuation, numbers or literals. A template that writes the schema as
// JSON renders more than this; one with a form of its own (Apertus,
// Functionary, Gemma 4) drops some keywords, and renders at least about
// two thirds of it (TestToolBytesUnderEveryTemplate: at least a quarter,
// and never fewer tokens than the bound takes the count for, on every
// reference template that shows tools). docs/SECURITY.md names the cases.
func ToolPromptBytes(tools []backends.Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + jsonTextBytes(t.Parameters)
	}
	return n
}

// TemplateVarBytes is the text of extra template variables (their string
// values, at any depth; not the keys, which a template names rather than
// writes): what a template that reads them renders at least.
func TemplateVarBytes(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case map[string]any:
		n := 0
		for _, x := range v {
			n += TemplateVarBytes(x)
		}
		return n
	case []any:
		n := 0
		for _, x := range v {
			n += TemplateVarBytes(x)
		}
		return n
	}
	return 0
}

// jsonTextBytes counts the bytes inside the string literals of the JSON
// text b (keys and values), an escape sequence as one byte: no more than
// the decoded strings hold. It does not validate b (the request decoder
// did) and allocates nothing.
func jsonTextBytes(b []byte) int {
	n, in := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			n++
			if i+1 < len(b) && b[i+1] == 'u' {
				i += 5
			} else {
				i++
			}
		default:
			n++
		}
	}
	return n
}

// checkMaxTokens refuses a completion budget that leaves no room for a
// prompt in a context of ctx tokens.
func checkMaxTokens(param string, maxTokens, ctx int) error {
	if ctx > 0 && maxTokens >= ctx {
		e := BadRequest(param, "%s %d leaves no room for a prompt in the context of %d tokens", param, maxTokens, ctx)
		e.Code = "context_length_exceeded"
		return e
	}
	return nil
}

// TooMany is the 400 for a list over its cap.
func TooMany(param string, n, limit int, what string) *Error {
	return BadRequest(param, "%s has %d %s, more than the %d allowed", param, n, what, limit)
}

// PromptBodyBound is the largest chat or completions body whose prompt
// might fit in ctx tokens.
func PromptBodyBound(ctx int) int64 { return 6*int64(ctx)*MaxBytesPerToken + promptBodySlack }

// bodyOverPrompt is the 400 for a body of n bytes over PromptBodyBound.
func bodyOverPrompt(param string, n int64, ctx int) *Error {
	e := BadRequest(param, "the request body has %d bytes, more than any prompt that fits in the context of %d tokens needs (at most %d bytes of JSON); shorten the %s",
		n, ctx, PromptBodyBound(ctx), param)
	e.Code = "context_length_exceeded"
	return e
}
