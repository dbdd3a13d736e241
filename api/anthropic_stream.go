package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

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
	sig := thinkingSignature(s)
	return anthropicBlock{Type: "thinking", Thinking: &s, Signature: &sig}
}

// thinkingSignature is the signature of a thinking block: Anthropic's
// clients expect one and send it back; modeld checks nothing with it.
func thinkingSignature(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "modeld-" + hex.EncodeToString(sum[:12])
}

// toolUseID is the Anthropic id of a backend's tool call.
func toolUseID(id string) string {
	switch {
	case strings.HasPrefix(id, "toolu_"):
		return id
	case id == "":
		return newID("toolu_")
	}
	return "toolu_" + strings.TrimPrefix(id, "call_")
}

// toolInput is a call's arguments as the input object. Arguments that are
// not an object (a call the grammar did not constrain) travel as
// {"arguments": text}, so that nothing the model wrote is lost.
func toolInput(args string) json.RawMessage {
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
func (s *Server) anthropicMessage(c *gin.Context, run *chatRun, model string, plan *anthropicPlan) {
	res, err := collect(run.Events)
	if errors.Is(err, errCut) {
		if cut := shutdownCause(c.Request.Context()); cut != nil {
			writeAnthropicError(c, cut)
		}
		return
	}
	if err != nil {
		writeAnthropicError(c, err)
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
		blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: toolUseID(tc.ID), Name: tc.Name, Input: toolInput(tc.Arguments)})
	}
	stop := stopSequence(backends.Event{Finish: res.Finish, Stop: res.Stop})
	reason := stopReason(res.Finish, stop)
	c.JSON(http.StatusOK, AnthropicResponse{ID: newID("msg_"), Type: "message", Role: "assistant", Model: model,
		Content: blocks, StopReason: &reason, StopSequence: stop, Usage: toAnthropicUsage(res.Usage)})
}

// anthropicSSE writes Anthropic's events: "event: <type>\ndata: <json>\n\n".
type anthropicSSE struct{ w *sseWriter }

func (a anthropicSSE) send(event string, v any) {
	a.w.start()
	b, err := json.Marshal(v)
	if err != nil {
		event = "error"
		b, _ = json.Marshal(anthropicErrorBody("api_error", err.Error()))
	}
	out := make([]byte, 0, len(event)+len(b)+16)
	out = append(append(append(append(out, "event: "...), event...), "\ndata: "...), b...)
	_, _ = a.w.c.Writer.Write(append(out, '\n', '\n'))
	a.w.c.Writer.Flush()
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
func (s *Server) anthropicStream(c *gin.Context, run *chatRun, model string, plan *anthropicPlan) {
	streamAnthropic(c, run.Events, run.PromptTokens, model, anthropicPingEvery)
}

// anthropicPingEvery is how often a stream sends a ping, as Anthropic's API
// does, so that a client or proxy with an idle timeout keeps a stream whose
// model is still reading a long prompt.
const anthropicPingEvery = 10 * time.Second

// streamAnthropic writes events as Anthropic's event stream; prompt is the
// prompt's length, ping the interval of pings.
func streamAnthropic(c *gin.Context, events <-chan backends.Event, prompt int, model string, ping time.Duration) {
	sse := anthropicSSE{newSSE(c)}
	msg := AnthropicResponse{ID: newID("msg_"), Type: "message", Role: "assistant", Model: model, Content: []anthropicBlock{},
		Usage: anthropicUsage{InputTokens: prompt}}
	sse.send("message_start", gin.H{"type": "message_start", "message": msg})
	sse.send("ping", gin.H{"type": "ping"})

	index, kind, call := -1, noBlock, -1
	var thinking strings.Builder
	stopBlock := func() {
		if kind == noBlock {
			return
		}
		if kind == thinkingKind {
			sse.send("content_block_delta", gin.H{"type": "content_block_delta", "index": index,
				"delta": gin.H{"type": "signature_delta", "signature": thinkingSignature(thinking.String())}})
			thinking.Reset()
		}
		sse.send("content_block_stop", gin.H{"type": "content_block_stop", "index": index})
		kind = noBlock
	}
	startBlock := func(k blockKind, b anthropicBlock) {
		stopBlock()
		index++
		kind = k
		sse.send("content_block_start", gin.H{"type": "content_block_start", "index": index, "content_block": b})
	}
	delta := func(d gin.H) {
		sse.send("content_block_delta", gin.H{"type": "content_block_delta", "index": index, "delta": d})
	}
	ticker := time.NewTicker(ping)
	defer ticker.Stop()
	for {
		var ev backends.Event
		select {
		case <-ticker.C:
			sse.send("ping", gin.H{"type": "ping"})
			continue
		case e, ok := <-events:
			if !ok {
				return
			}
			ev = e
		}
		if ev.Reasoning != "" {
			if kind != thinkingKind {
				empty, sig := "", ""
				startBlock(thinkingKind, anthropicBlock{Type: "thinking", Thinking: &empty, Signature: &sig})
			}
			thinking.WriteString(ev.Reasoning)
			delta(gin.H{"type": "thinking_delta", "thinking": ev.Reasoning})
		}
		if ev.Text != "" {
			if kind != textKind {
				startBlock(textKind, textBlock(""))
			}
			delta(gin.H{"type": "text_delta", "text": ev.Text})
		}
		for _, d := range ev.ToolCalls {
			if kind != toolKind || d.Index != call {
				call = d.Index
				startBlock(toolKind, anthropicBlock{Type: "tool_use", ID: toolUseID(d.ID), Name: d.Name, Input: json.RawMessage("{}")})
			}
			if d.Arguments != "" {
				delta(gin.H{"type": "input_json_delta", "partial_json": d.Arguments})
			}
		}
		if !ev.Done {
			continue
		}
		switch {
		case ev.Finish == backends.FinishCancelled:
			if cut := shutdownCause(c.Request.Context()); cut != nil {
				e := toAPIError(cut)
				sse.send("error", anthropicErrorBody(anthropicErrorType(e), e.Message))
			}
			return
		case generationError(ev) != nil:
			e := toAPIError(generationError(ev))
			sse.send("error", anthropicErrorBody(anthropicErrorType(e), e.Message))
			return
		}
		if index < 0 {
			startBlock(textKind, textBlock(""))
		}
		stopBlock()
		stop := stopSequence(ev)
		u := toAnthropicUsage(ev.Usage)
		sse.send("message_delta", gin.H{"type": "message_delta",
			"delta": gin.H{"stop_reason": stopReason(ev.Finish, stop), "stop_sequence": stop},
			"usage": u})
		sse.send("message_stop", gin.H{"type": "message_stop"})
		return
	}
}

// anthropicErrorBody is an error in Anthropic's shape.
func anthropicErrorBody(typ, msg string) gin.H {
	return gin.H{"type": "error", "error": gin.H{"type": typ, "message": msg}}
}

// anthropicErrorType is the Anthropic error type of an error's status. A
// busy model (or one in its load cooldown) is a 503 with Retry-After and
// type overloaded_error, as every dialect has it (Anthropic's own API says
// 529; its clients retry both and honour Retry-After).
func anthropicErrorType(e *Error) string {
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

// writeAnthropicError sends err in Anthropic's shape, with the status (and
// Retry-After) of the one mapping.
func writeAnthropicError(c *gin.Context, err error) {
	writeErrorAs(c, err, anthropicShape)
}

// anthropicShape is an API error in Anthropic's shape:
// {"type": "error", "error": {"type", "message"}}.
func anthropicShape(e *Error) any { return anthropicErrorBody(anthropicErrorType(e), e.Message) }
