package backends

import "encoding/json"

// The internal request and event model: what a dialect (OpenAI today) turns
// its wire types into, and what every Generator understands. A dialect is
// translation to and from these types; a backend never sees wire types.

// Message is one turn of a conversation.
type Message struct {
	Role string `json:"role"` // system, user, assistant, tool
	// Content is the message's text: its text parts joined, for backends
	// that read text only.
	Content string `json:"content"`
	// Reasoning is a past assistant turn's reasoning (OpenAI-compatible
	// servers' reasoning_content); chat templates decide whether to render
	// it, wrap it or drop it.
	Reasoning string `json:"reasoning_content,omitempty"`
	// Parts are the typed content parts as the client sent them (nil when
	// it sent a plain string). A backend that cannot read a part's type
	// refuses the request with a *BadRequestError.
	Parts []ContentPart `json:"parts,omitempty"`
	Name  string        `json:"name,omitempty"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool turn (its content is the result) to the call.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// PartType is the type of a content part.
type PartType string

// Content part types.
const (
	PartText  PartType = "text"
	PartImage PartType = "image"
	PartAudio PartType = "audio"
	PartFile  PartType = "file"
)

// ContentPart is one typed part of a message's content.
type ContentPart struct {
	Type PartType `json:"type"`
	Text string   `json:"text,omitempty"`
	// URL is where an image or file is (a data: URL for inline data).
	URL string `json:"url,omitempty"`
	// Data and Format carry inline audio or file bytes.
	Data   []byte `json:"data,omitempty"`
	Format string `json:"format,omitempty"`
	// WireType is the dialect's own name for the part ("image_url",
	// "input_audio"), for error messages.
	WireType string `json:"wire_type,omitempty"`
	// Image is an image part's decoded pixels (internal/imagein decodes
	// what the client sent, within its limits, before a backend sees it).
	Image *Image `json:"image,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Strict     bool            `json:"strict,omitempty"`
	// Input, when set, makes the tool freeform: its one argument is the
	// string "input" (Parameters says so to the template), whose text the
	// grammar constrains. A dialect with freeform tools (the Responses
	// API's custom tools) returns that text as the call.
	Input *ToolInput `json:"input,omitempty"`
}

// ToolInput is the grammar of a freeform tool's input text.
type ToolInput struct {
	// Syntax is "lark" (a Lark grammar), "regex" (a regular expression)
	// or "" (any text).
	Syntax     string `json:"syntax,omitempty"`
	Definition string `json:"definition,omitempty"`
}

// FreeformParameters is the parameters schema of a freeform tool: one
// required string, input.
var FreeformParameters = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false}`)

// ToolChoiceMode says whether and which tools the model may call.
type ToolChoiceMode string

// Tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	ToolChoiceFunction ToolChoiceMode = "function" // ToolChoice.Name only
)

// ToolChoice constrains tool calls; the zero value is auto.
type ToolChoice struct {
	Mode ToolChoiceMode `json:"mode,omitempty"`
	Name string         `json:"name,omitempty"`
	// Single is parallel_tool_calls false: at most one call (exactly one
	// under required or a named function).
	Single bool `json:"single,omitempty"`
	// Grammar is the GBNF grammar, rooted at "root", of one call object
	// {"name": ..., "arguments": ...} of the tools the choice allows, each
	// tool's arguments under its parameters schema; CompileToolChoice
	// derives it in the daemon. A backend wraps it in its template's call
	// syntax. Empty: calls are not constrained.
	Grammar string `json:"grammar,omitempty"`
}

// ToolCall is a call the model made (or made in an earlier turn).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text, as generated
}

// ToolCallDelta is a piece of a tool call in a stream: the first piece of a
// call has its ID and Name, later ones append to Arguments.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ResponseFormatType is what shape the output must have.
type ResponseFormatType string

// Response formats.
const (
	FormatText       ResponseFormatType = "text"
	FormatJSONObject ResponseFormatType = "json_object"
	FormatJSONSchema ResponseFormatType = "json_schema"
)

// ResponseFormat constrains the output; the zero value (or FormatText) is free text.
type ResponseFormat struct {
	Type   ResponseFormatType `json:"type,omitempty"`
	Name   string             `json:"name,omitempty"`
	Schema json.RawMessage    `json:"schema,omitempty"`
	Strict bool               `json:"strict,omitempty"`
	// Grammar is the GBNF grammar the daemon derived from Type and Schema
	// (package backends/llama/grammar) before any model was acquired; the
	// llama backend samples under it. Empty for free text.
	Grammar string `json:"grammar,omitempty"`
}

// IsText reports whether f asks for free text.
func (f ResponseFormat) IsText() bool { return f.Type == "" || f.Type == FormatText }

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

// Request is one generation. The prompt is Prompt (token ids, when the
// caller has rendered and tokenized it with the model's Tokenizer), else
// Text (a raw prompt), else Messages rendered by the backend. Messages and
// Tools travel with a tokenized prompt too, for backends that parse tool
// calls out of the output.
type Request struct {
	Prompt   []int32
	Text     string    `json:",omitempty"`
	Messages []Message `json:",omitempty"`
	// MaxTokens bounds the completion; 0 means what is left of the context.
	MaxTokens int
	Sampling  Sampling
	// Stop strings end the completion; the matched text is never emitted,
	// even when it arrives split across tokens.
	Stop []string

	Tools          []Tool         `json:",omitempty"`
	ToolChoice     ToolChoice     `json:",omitzero"`
	ResponseFormat ResponseFormat `json:",omitzero"`
	// Logprobs asks for the log-probabilities of the sampled tokens, and
	// TopLogprobs for that many alternatives at each position.
	Logprobs    bool `json:",omitempty"`
	TopLogprobs int  `json:",omitempty"`
	// N is how many completions to generate (0 and 1: one).
	N int `json:",omitempty"`
	// Speculative turns speculative decoding (the llama backend's prompt
	// lookup) on or off for this request; nil leaves it to the model's
	// settings. It never changes what is generated, only how fast: greedy
	// and seeded output are the same either way.
	Speculative *bool `json:",omitempty"`
}

// Unsupported returns a *BadRequestError for the first field of r that a
// backend supporting neither logprobs nor n > 1 cannot honour; nil when r
// asks for neither. Tools are every backend's to read: one that cannot
// parse calls renders them or ignores them. Structured output is each
// backend's to check: one that cannot constrain its output refuses a
// ResponseFormat other than text itself.
func (r *Request) Unsupported(backend string) error {
	switch {
	case r.Logprobs || r.TopLogprobs > 0:
		return &BadRequestError{Param: "logprobs", Message: backend + " does not support logprobs"}
	case r.N > 1:
		return &BadRequestError{Param: "n", Message: backend + " supports only n=1"}
	}
	return nil
}

// FinishReason says why a generation ended.
type FinishReason string

// Finish reasons.
const (
	FinishStop      FinishReason = "stop"       // end-of-generation token or a stop string
	FinishLength    FinishReason = "length"     // MaxTokens reached
	FinishToolCalls FinishReason = "tool_calls" // the model called tools
	FinishCancelled FinishReason = "cancelled"  // the request's context was cancelled
	FinishError     FinishReason = "error"      // see Event.Err
)

// Usage counts the tokens of one generation. CompletionTokens counts every
// sampled token, the end-of-generation token included. CachedTokens is the
// prompt prefix whose KV was reused from an earlier request.
// ReasoningTokens counts the completion tokens sampled inside a reasoning
// model's thinking block (its markers included).
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	ReasoningTokens  int `json:",omitempty"`
}

// Event is one item of a generation's stream. Every sampled token except an
// end-of-generation token gives one event with Token set and the text it
// releases (possibly empty: text is held while it could be the start of a
// stop string or is an incomplete UTF-8 sequence). Reasoning and ToolCalls
// carry deltas of the model's reasoning and of its tool calls. The last
// event has Done set, Token -1, the rest of the held text, the finish reason
// and the usage; a failed generation ends with FinishError and Err. With
// N > 1 the choices' events interleave, each carrying its Index; every choice
// ends with its own final event (its finish reason, and a usage with the
// shared prompt and that choice's completion tokens), and the stream closes
// after the last of them.
type Event struct {
	Token     int32
	Text      string
	Reasoning string          `json:",omitempty"`
	ToolCalls []ToolCallDelta `json:",omitempty"`
	// Logprobs is set on a token's event when the request asked for
	// Logprobs: the token's log-probability and its TopLogprobs most
	// likely alternatives. nil otherwise (and on the final event).
	Logprobs *Logprobs `json:",omitempty"`
	// Index is the choice the event belongs to (with N > 1).
	Index int `json:",omitempty"`
	// Stop is the stop string of the request that ended the generation, on
	// the final event of one that finished on it; "" when an
	// end-of-generation token (or anything else) ended it.
	Stop   string `json:",omitempty"`
	Done   bool
	Finish FinishReason
	Err    error
	Usage  Usage
}

// TokenLogprob is a token and its log-probability (natural log).
type TokenLogprob struct {
	ID int32
	// Bytes is the token's text, control tokens rendered; one token may
	// hold part of a UTF-8 sequence, so it travels as bytes.
	Bytes   []byte
	Logprob float32
}

// Logprobs is what a generated token reports when the request asks for
// log-probabilities: the token itself and the Top alternatives at its
// position, most likely first (fewer when fewer tokens were allowed there;
// the sampled token is among them when it ranks within them).
type Logprobs struct {
	TokenLogprob
	Top []TokenLogprob `json:",omitempty"`
}
