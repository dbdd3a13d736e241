package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/accesslog"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
)

// ChatModel is a loaded model that generates, as the chat and completions
// handlers use it: any backend's model with the backends.Generator
// capability. When it is also a backends.Tokenizer the handlers render and
// tokenize the prompt themselves, to check its size before generating;
// otherwise the backend gets the messages (or the raw prompt). Each call
// takes the request's context: when the client goes away, the call (and the
// backend's work for it) stops.
type ChatModel interface {
	backends.Model
	backends.Generator
}

// DeviceHeader names the response header that says which device ran a request.
const DeviceHeader = "X-Modeld-Device"

var ChatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// DecodeJSON reads the request body into v, refusing what is not one JSON
// object. The access rules (access.go) bound the body's size and time.
func DecodeJSON(c *gin.Context, v any) error {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		if e := BodyReadError(err); e != nil {
			return e
		}
		return BadRequest("", "cannot read the request body: %v", err)
	}
	return UnmarshalBody(body, v)
}

// DecodePromptJSON is DecodeJSON for a body that carries a prompt (param
// names its field): a body too large for any prompt that fits in ctx tokens
// is refused from its length, before it is read or decoded.
func DecodePromptJSON(c *gin.Context, v any, param string, ctx int) error {
	bound := PromptBodyBound(ctx)
	if n := c.Request.ContentLength; n > bound {
		return bodyOverPrompt(param, n, ctx)
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, bound+1))
	if err != nil {
		if e := BodyReadError(err); e != nil {
			return e
		}
		return BadRequest("", "cannot read the request body: %v", err)
	}
	if n := int64(len(body)); n > bound {
		return bodyOverPrompt(param, n, ctx)
	}
	return UnmarshalBody(body, v)
}

// UnmarshalBody decodes a request body into v. Its errors quote no more of
// the body than a few bytes.
func UnmarshalBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", "the request body is empty; send a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var ae *Error // a field's own decoder named the field (KeepAlive)
		if errors.As(err, &ae) {
			return ae
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return typeError(v, te)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return syntaxError(body, se)
		}
		return BadRequest("", "the request body is not valid JSON: %s", Clip(err.Error()))
	}
	return nil
}

// resolveModel is the store model that name means (Options.ResolveModel).
func (s *Core) resolveModel(name string) string {
	if s.Opt.ResolveModel == nil || name == "" {
		return name
	}
	return s.Opt.ResolveModel(name)
}

// Acquire finds or loads model id (in its canonical form, so that "m" and
// "m:latest" share one instance) and sets the device header from it.
func (s *Core) Acquire(c *gin.Context, id string, ka KeepAlive) (*cache.Handle, error) {
	id = s.resolveModel(id)
	accesslog.NoteModel(c, id)
	if s.Opt.Cache == nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "no model runtime is configured"}
	}
	if id == "" {
		return nil, BadRequest("model", "model is required")
	}
	canon, err := models.ParseID(id)
	if err != nil {
		return nil, err
	}
	h, err := s.Opt.Cache.Acquire(c.Request.Context(), canon.String(), cache.AcquireOptions{KeepAlive: ka.D})
	if err != nil {
		return nil, err
	}
	setDevice(c, h.Instance())
	return h, nil
}

// AcquireChat finds or loads model id and checks that it serves chat; a
// model the store says serves another task is refused before it is loaded.
func (s *Core) AcquireChat(c *gin.Context, id string, ka KeepAlive) (*cache.Handle, ChatModel, error) {
	h, m, err := s.AcquireModel(c, id, ka, chatEndpoint)
	if err != nil {
		return nil, nil, err
	}
	cm, ok := m.(ChatModel)
	if !ok {
		h.Release()
		return nil, nil, WrongModel(id, m, chatEndpoint.What)
	}
	return h, cm, nil
}

// setDevice sets the device header from an instance that knows its placement.
func setDevice(c *gin.Context, inst any) {
	dev := "cpu"
	if p, ok := inst.(cache.Placed); ok && p.Placement().Device != "" {
		dev = p.Placement().Device
	}
	c.Header(DeviceHeader, dev)
}

// JoinBadRequests merges several 400s into one that lists the problems (the
// first maxListedProblems of them, then how many more there are). The
// problems come in the request's field order; the first that names a
// field gives the param (and its code), so the answer is the same every
// time.
func JoinBadRequests(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, 0, min(len(errs), maxListedProblems)+1)
	for _, e := range errs[:min(len(errs), maxListedProblems)] {
		msgs = append(msgs, e.Error())
	}
	if more := len(errs) - maxListedProblems; more > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more problems", more))
	}
	out := &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: strings.Join(msgs, "; ")}
	for _, e := range errs {
		var ae *Error
		if errors.As(e, &ae) && ae.Param != nil {
			out.Param, out.Code = ae.Param, ae.Code
			break
		}
		var p backends.Parameter
		if errors.As(e, &p) && p.ErrorParam() != "" {
			param := p.ErrorParam()
			out.Param = &param
			if c, ok := p.(backends.Coder); ok && c.ErrorCode() != "" {
				out.Code = c.ErrorCode()
			}
			break
		}
	}
	return out
}

// AddToolDeltas appends a stream's tool-call deltas to the calls they build.
func AddToolDeltas(calls []WireToolCall, deltas []backends.ToolCallDelta) []WireToolCall {
	for _, d := range deltas {
		for d.Index >= len(calls) {
			calls = append(calls, WireToolCall{Type: "function"})
		}
		tc := &calls[d.Index]
		if d.ID != "" {
			tc.ID = d.ID
		}
		tc.Function.Name += d.Name
		tc.Function.Arguments += d.Arguments
	}
	return calls
}

func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ChatPromptIDs gives the prompt tokens a chat generation of msgs sees, the
// one path of /v1/chat/completions and /v1/tokenize: a ChatTokenizer renders
// and tokenizes in one step (message text as text); a plain Tokenizer
// renders, then tokenizes with special parsing. rendered is false when the
// model does neither (the backend renders messages itself). The template
// sees the tools unless tool_choice is none.
func ChatPromptIDs(ctx context.Context, model backends.Model, gen *backends.Request, msgs []backends.Message) (ids []int32, rendered bool, err error) {
	var tools []backends.Tool
	if gen.ToolChoice.Mode != backends.ToolChoiceNone {
		tools = gen.Tools
	}
	if ct, ok := model.(backends.ChatTokenizer); ok {
		ids, err := ct.ChatPromptContext(ctx, msgs, tools, true)
		return ids, true, err
	}
	tok, ok := model.(backends.Tokenizer)
	if !ok {
		return nil, false, nil
	}
	prompt, err := tok.ApplyChatTemplateContext(ctx, msgs, true)
	if err != nil {
		return nil, true, err
	}
	if err := CheckPromptBytes("messages", len(prompt), gen.MaxTokens, model.Info().ContextSize); err != nil {
		return nil, true, err
	}
	ids, err = tok.TokenizeContext(ctx, prompt, true, true)
	if err != nil {
		return nil, true, fmt.Errorf("tokenize the prompt: %w", err)
	}
	return ids, true, nil
}
