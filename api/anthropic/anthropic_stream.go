package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The answers of the Messages dialect: a message object, or Anthropic's
// server-sent events (message_start, ping, content_block_start /
// content_block_delta / content_block_stop per block, message_delta with
// the stop reason and usage, message_stop; an error event when the
// generation fails after the stream began), and errors in Anthropic's shape.

// anthropicBlock is a content block of an answer.
type anthropicBlock struct {
	Type string `json:"type"`
	// Text is a text block's text (always present on one).
	Text *string `json:"text,omitempty"`
	// Thinking and Signature are a thinking block's reasoning and its
	// signature (opaque; modeld's is a digest of the reasoning).
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// anthropicUsage counts a message's tokens as Anthropic does: input_tokens
// are the prompt tokens not read from the cache (the prompt's KV that an
// earlier request left), cache_read_input_tokens those that were;
// output_tokens every sampled token.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func toAnthropicUsage(u backends.Usage) anthropicUsage {
	return anthropicUsage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens}
}

// AnthropicResponse is the message POST /v1/messages answers.
type AnthropicResponse struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

func textBlock(s string) anthropicBlock { return anthropicBlock{Type: "text", Text: &s} }

func thinkingBlock(s string) anthropicBlock {
	sig := ThinkingSignature(s)
	return anthropicBlock{Type: "thinking", Thinking: &s, Signature: &sig}
}

// ThinkingSignature is the signature of a thinking block: Anthropic's
// clients expect one and send it back; modeld checks nothing with it.
func ThinkingSignature(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "modeld-" + hex.EncodeToString(sum[:12])
}

// toolUseID is the Anthropic id of a backend's tool call.
func toolUseID(id string) string {
	switch {
	case strings.HasPrefix(id, "toolu_"):
		return id
	case id == "":
		return core.NewID("toolu_")
	}
	return "toolu_" + strings.TrimPrefix(id, "call_")
}

// ToolInput is a call's arguments as the input object. Arguments that are
// not an object (a call the grammar did not constrain) travel as
// {"arguments": text}, so that nothing the model wrote is lost.
func ToolInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// stopReason is the Anthropic stop_reason of a finish; stop is the stop
// sequence that ended it, if one did.
func stopReason(f backends.FinishReason, stop *string) string {
	switch {
	case f == backends.FinishLength:
		return "max_tokens"
	case f == backends.FinishToolCalls:
		return "tool_use"
	case stop != nil:
		return "stop_sequence"
	}
	return "end_turn"
}

// stopSequence is the stop sequence that ended a generation, from its
// final event (nil when none did).
func stopSequence(ev backends.Event) *string {
	if ev.Finish != backends.FinishStop || ev.Stop == "" {
		return nil
	}
	stop := ev.Stop
	return &stop
}

// anthropicMessage answers a generation as one message.
func (s *anthropicAPI) anthropicMessage(c *gin.Context, run *core.ChatRun, model string, plan *anthropicPlan) {
	res, err := core.Collect(run.Events)
	if errors.Is(err, core.ErrCut) {
		if cut := core.ShutdownCause(c.Request.Context()); cut != nil {
			WriteAnthropicError(c, cut)
		}
		return
	}
	if err != nil {
		WriteAnthropicError(c, err)
		return
	}
	var blocks []anthropicBlock
	if res.Reasoning != "" {
		blocks = append(blocks, thinkingBlock(res.Reasoning))
	}
	if res.Text != "" || len(res.ToolCalls) == 0 && res.Reasoning == "" {
		blocks = append(blocks, textBlock(res.Text))
	}
	for _, tc := range res.ToolCalls {
		blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: toolUseID(tc.ID), Name: tc.Name, Input: ToolInput(tc.Arguments)})
	}
	stop := stopSequence(backends.Event{Finish: res.Finish, Stop: res.Stop})
	reason := stopReason(res.Finish, stop)
	c.JSON(http.StatusOK, AnthropicResponse{ID: core.NewID("msg_"), Type: "message", Role: "assistant", Model: model,
		Content: blocks, StopReason: &reason, StopSequence: stop, Usage: toAnthropicUsage(res.Usage)})
}

// anthropicSSE writes Anthropic's events: "event: <type>\ndata: <json>\n\n".
type anthropicSSE struct{ w *core.SseWriter }

func (a anthropicSSE) send(event string, v any) {
	a.w.Start()
	b, err := json.Marshal(v)
	if err != nil {
		event = "error"
		b, _ = json.Marshal(anthropicErrorBody("api_error", err.Error()))
	}
	out := make([]byte, 0, len(event)+len(b)+16)
	out = append(append(append(append(out, "event: "...), event...), "\ndata: "...), b...)
	_, _ = a.w.C.Writer.Write(append(out, '\n', '\n'))
	a.w.C.Writer.Flush()
}

// blockKind is what a stream's open content block holds.
type blockKind int

const (
	noBlock blockKind = iota
	thinkingKind
	textKind
	toolKind
)

// anthropicStream answers a generation as Anthropic's event stream. A new
// block starts whenever the kind of delta changes (reasoning, text, a tool
// call's index); the open block stops before the next starts.
func (s *anthropicAPI) anthropicStream(c *gin.Context, run *core.ChatRun, model string, plan *anthropicPlan) {
	StreamAnthropic(c, run.Events, run.PromptTokens, model, anthropicPingEvery)
}

// anthropicPingEvery is how often a stream sends a ping, as Anthropic's API
// does, so that a client or proxy with an idle timeout keeps a stream whose
// model is still reading a long prompt.
const anthropicPingEvery = 10 * time.Second

// StreamAnthropic writes events as Anthropic's event stream; prompt is the
// prompt's length, ping the interval of pings.
func StreamAnthropic(c *gin.Context, events <-chan backends.Event, prompt int, model string, ping time.Duration) {
	e := &anthropicEncoder{sse: anthropicSSE{core.NewSSE(c)}, index: -1, call: -1, every: ping}
	msg := AnthropicResponse{ID: core.NewID("msg_"), Type: "message", Role: "assistant", Model: model, Content: []anthropicBlock{},
		Usage: anthropicUsage{InputTokens: prompt}}
	e.sse.send("message_start", gin.H{"type": "message_start", "message": msg})
	e.sse.send("ping", gin.H{"type": "ping"})
	core.StreamEvents(c.Request.Context(), events, 1, e)
}

// anthropicEncoder is the encoder of Anthropic's event stream: content
// blocks that start when the kind of delta changes, a message_delta and
// message_stop at the finish, pings while idle.
type anthropicEncoder struct {
	sse         anthropicSSE
	index, call int
	kind        blockKind
	thinking    strings.Builder
	every       time.Duration
}

func (e *anthropicEncoder) PingEvery() time.Duration { return e.every }
func (e *anthropicEncoder) Ping()                    { e.sse.send("ping", gin.H{"type": "ping"}) }

func (e *anthropicEncoder) stopBlock() {
	if e.kind == noBlock {
		return
	}
	if e.kind == thinkingKind {
		e.sse.send("content_block_delta", gin.H{"type": "content_block_delta", "index": e.index,
			"delta": gin.H{"type": "signature_delta", "signature": ThinkingSignature(e.thinking.String())}})
		e.thinking.Reset()
	}
	e.sse.send("content_block_stop", gin.H{"type": "content_block_stop", "index": e.index})
	e.kind = noBlock
}

func (e *anthropicEncoder) startBlock(k blockKind, b anthropicBlock) {
	e.stopBlock()
	e.index++
	e.kind = k
	e.sse.send("content_block_start", gin.H{"type": "content_block_start", "index": e.index, "content_block": b})
}

func (e *anthropicEncoder) send(d gin.H) {
	e.sse.send("content_block_delta", gin.H{"type": "content_block_delta", "index": e.index, "delta": d})
}

func (e *anthropicEncoder) Delta(ev backends.Event) {
	if ev.Reasoning != "" {
		if e.kind != thinkingKind {
			empty, sig := "", ""
			e.startBlock(thinkingKind, anthropicBlock{Type: "thinking", Thinking: &empty, Signature: &sig})
		}
		e.thinking.WriteString(ev.Reasoning)
		e.send(gin.H{"type": "thinking_delta", "thinking": ev.Reasoning})
	}
	if ev.Text != "" {
		if e.kind != textKind {
			e.startBlock(textKind, textBlock(""))
		}
		e.send(gin.H{"type": "text_delta", "text": ev.Text})
	}
	for _, d := range ev.ToolCalls {
		if e.kind != toolKind || d.Index != e.call {
			e.call = d.Index
			e.startBlock(toolKind, anthropicBlock{Type: "tool_use", ID: toolUseID(d.ID), Name: d.Name, Input: json.RawMessage("{}")})
		}
		if d.Arguments != "" {
			e.send(gin.H{"type": "input_json_delta", "partial_json": d.Arguments})
		}
	}
}

func (e *anthropicEncoder) Finish(ev backends.Event) {
	if e.index < 0 {
		e.startBlock(textKind, textBlock(""))
	}
	e.stopBlock()
	stop := stopSequence(ev)
	e.sse.send("message_delta", gin.H{"type": "message_delta",
		"delta": gin.H{"stop_reason": stopReason(ev.Finish, stop), "stop_sequence": stop},
		"usage": toAnthropicUsage(ev.Usage)})
	e.sse.send("message_stop", gin.H{"type": "message_stop"})
}

func (e *anthropicEncoder) Fail(err error) {
	ae := core.ToAPIError(err)
	e.sse.send("error", anthropicErrorBody(AnthropicErrorType(ae), ae.Message))
}

func (e *anthropicEncoder) End() {}

// anthropicErrorBody is an error in Anthropic's shape.
func anthropicErrorBody(typ, msg string) gin.H {
	return gin.H{"type": "error", "error": gin.H{"type": typ, "message": msg}}
}

// AnthropicErrorType is the Anthropic error type of an error's status. A
// busy model (or one in its load cooldown) is a 503 with Retry-After and
// type overloaded_error, as every dialect has it (Anthropic's own API says
// 529; its clients retry both and honour Retry-After).
func AnthropicErrorType(e *core.Error) string {
	switch st := e.Status; {
	case st == http.StatusUnauthorized:
		return "authentication_error"
	case st == http.StatusForbidden:
		return "permission_error"
	case st == http.StatusNotFound:
		return "not_found_error"
	case st == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case st == http.StatusTooManyRequests:
		return "rate_limit_error"
	case st == http.StatusServiceUnavailable && e.RetryAfter > 0, st == 529:
		return "overloaded_error"
	case st == http.StatusGatewayTimeout:
		return "timeout_error"
	case st >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// WriteAnthropicError sends err in Anthropic's shape, with the status (and
// Retry-After) of the one mapping.
func WriteAnthropicError(c *gin.Context, err error) {
	core.WriteErrorAs(c, err, anthropicShape)
}

// anthropicShape is an API error in Anthropic's shape:
// {"type": "error", "error": {"type", "message"}}.
func anthropicShape(e *core.Error) any { return anthropicErrorBody(AnthropicErrorType(e), e.Message) }
