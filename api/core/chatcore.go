package core

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/accesslog"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// The chat core: every dialect (OpenAI chat, Ollama, Anthropic Messages,
// OpenAI Responses) translates its request into a ChatPlan and runs it here,
// so model resolution, keep-alive, admission, prompt checks, the prompt that
// /v1/tokenize counts, tool and format grammars and cancellation are one
// implementation. A dialect only decodes its request and encodes the events.

// ChatCall is one chat generation as a dialect asks for it.
type ChatCall struct {
	Model     string
	KeepAlive KeepAlive
	Plan      *ChatPlan
	// Vars are extra chat-template variables (chat_template_kwargs,
	// enable_thinking); nil for none.
	Vars map[string]any
	// Single asks for at most one tool call (parallel_tool_calls false).
	Single bool
	// Ceiling makes plan.gen.MaxTokens an upper bound (Anthropic's
	// max_tokens): what the model's context leaves after the prompt bounds
	// the completion instead of refusing the request.
	Ceiling bool
}

// NewChatPlan checks a dialect's translated request without a model: the
// message count and the prompt's size — messages and tools, everything the
// template gets — against the largest context a model gets. gen's tools,
// tool choice and response format must already be compiled
// (CompileTooling). f names the dialect's fields, which its errors name,
// and the template text it adds beyond messages and tools. Every dialect
// plans through it.
func NewChatPlan(gen backends.Request, msgs []backends.Message, contextCap int, f ConvFields) (*ChatPlan, error) {
	param := f.Conversation
	if len(msgs) == 0 {
		return nil, BadRequest(param, "%s must not be empty", param)
	}
	if n := len(msgs); n > MaxChatMessages {
		return nil, TooMany(param, n, MaxChatMessages, "messages")
	}
	if err := decodeImages(msgs, param); err != nil {
		return nil, err
	}
	p := &ChatPlan{Gen: gen, Msgs: msgs, param: param}
	for _, m := range msgs {
		// Content is the text parts joined: the parts' text is not counted again.
		p.Bytes += len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			p.Bytes += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
	}
	p.Bytes += f.ExtraBytes
	p.toolBytes = ToolPromptBytes(gen.Tools)
	if err := checkChatBytes(param, p.Bytes, cmp.Or(f.Tools, "tools"), p.toolBytes, gen.MaxTokens, contextCap); err != nil {
		return nil, err
	}
	return p, nil
}

// FieldNames are a dialect's names for what the core's refusals of tools
// and formats speak of: the response format's field, the tools' field, what
// one tool is called and the field of its schema. A dialect passes them
// once; the backend's errors are neutral (backends.SchemaError).
type FieldNames struct {
	Format, Tools, Tool, Schema string
}

// OpenAINames are the Chat Completions API's names.
var OpenAINames = FieldNames{Format: "response_format", Tools: "tools", Tool: "function", Schema: "parameters"}

// ConvFields are a dialect's names of the conversation's field
// ("messages", "input", "prompt") and of the tools' field ("" is tools),
// and the bytes of text it gives the template beyond messages and tools
// (OpenAI's chat_template_kwargs).
type ConvFields struct {
	Conversation, Tools string
	ExtraBytes          int
}

// CompileTooling checks gen's tools and derives the grammars of its tool
// choice and response format, before any model is acquired: tools too long
// for ContextCap tokens are refused before anything reads them, and a
// schema that cannot be enforced — under any tool choice but none — is a
// 400 naming the tool and the keyword in the dialect's words (n).
func CompileTooling(gen *backends.Request, n FieldNames, env PlanEnv) error {
	if gen.ToolChoice.Mode != backends.ToolChoiceNone {
		if err := CheckToolBytes(n.Tools, gen.Tools, env.ContextCap); err != nil {
			return err
		}
	}
	if err := MeetToolChoice(gen, "tool_choice"); err != nil {
		return err
	}
	if err := backends.CompileResponseFormat(env.Constraints, &gen.ResponseFormat); err != nil {
		return schemaRefusal(err, n)
	}
	if err := backends.CompileToolChoice(env.Constraints, gen); err != nil {
		return schemaRefusal(err, n)
	}
	return nil
}

// schemaRefusal is the 400 of a schema or grammar the backend cannot
// enforce (a *backends.SchemaError), named in the dialect's words: its
// format field, or its tools field, the tool and the tool's schema field.
// Other errors pass through asBadRequest.
func schemaRefusal(err error, n FieldNames) error {
	var se *backends.SchemaError
	if !errors.As(err, &se) {
		return asBadRequest(err, n.Tools)
	}
	switch se.Kind {
	case backends.SchemaOfTool:
		return BadRequest(n.Tools, "%s: %s %s's %s: %s", n.Tools, n.Tool, Quote(se.Tool), n.Schema, se.Reason)
	case backends.GrammarOfTool:
		return BadRequest(n.Tools, "%s: %s %s's grammar: %s", n.Tools, n.Tool, Quote(se.Tool), se.Reason)
	}
	return BadRequest(n.Format, "%s: %s", n.Format, se.Reason)
}

func HasTool(tools []backends.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// asBadRequest turns a backend's BadRequestError into a 400 on its param
// (or def); other errors pass unchanged.
func asBadRequest(err error, def string) error {
	var br *backends.BadRequestError
	if errors.As(err, &br) {
		param := br.Param
		if param == "" {
			param = def
		}
		return BadRequest(param, "%s", br.Error())
	}
	return err
}

// ChatRun is a started generation. Release the handle when done with Events.
type ChatRun struct {
	Events <-chan backends.Event
	// PromptTokens is the rendered prompt's length when modeld rendered it
	// (0 when the backend renders).
	PromptTokens int
	handle       *cache.Handle
}

// Release gives the model back to the cache.
func (r *ChatRun) Release() { r.handle.Release() }

// StartChat acquires call.model (refusing a model of another task before it
// loads), checks the prompt against its context, renders and tokenizes it as
// /v1/tokenize does, and starts generating under the request's context: a
// client that goes away stops the work.
func (s *Core) StartChat(c *gin.Context, call ChatCall) (*ChatRun, error) {
	if err := s.FetchImages(c.Request.Context(), call.Plan.Msgs, call.Plan.param); err != nil {
		return nil, err // before the model loads
	}
	h, model, err := s.AcquireChat(c, call.Model, call.KeepAlive)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	gen := call.Plan.Gen
	maxTokens := gen.MaxTokens
	if call.Ceiling {
		gen.MaxTokens = 0 // bounded by the context once the prompt is known
	}
	if err := checkChatBytes(call.Plan.param, call.Plan.Bytes, "tools", call.Plan.toolBytes, gen.MaxTokens, model.Info().ContextSize); err != nil {
		h.Release()
		return nil, err
	}
	gen.Messages = call.Plan.Msgs
	ids, rendered, err := ChatPromptIDs(backends.WithTemplateVars(ctx, call.Vars), model, &gen, call.Plan.Msgs)
	if err != nil {
		h.Release()
		return nil, imageParam(promptParam(err, call.Plan.param), call.Model, call.Plan.param)
	}
	if rendered {
		gen.Prompt = ids
	}
	if call.Ceiling {
		gen.MaxTokens = maxTokens
		if n := model.Info().ContextSize; rendered && n > 0 && maxTokens > n-len(ids) {
			gen.MaxTokens = 0 // what the context leaves
		}
	}
	if call.Single && len(gen.Tools) > 0 {
		model = firstCallOnly{model}
	}
	return s.StartTokens(c, h, model, gen, call.Plan.param)
}

// StartText is StartChat for a raw prompt that the caller templated itself:
// control-token text in it is those tokens, as llama.cpp's server has it.
func (s *Core) StartText(c *gin.Context, model string, ka KeepAlive, gen backends.Request, prompt string, param string) (*ChatRun, error) {
	h, m, err := s.AcquireChat(c, model, ka)
	if err != nil {
		return nil, err
	}
	if err := CheckPromptBytes(param, len(prompt), gen.MaxTokens, m.Info().ContextSize); err != nil {
		h.Release()
		return nil, err
	}
	if prompt == "" {
		h.Release()
		return nil, BadRequest(param, "%s is empty", param)
	}
	gen.Text = prompt
	_, inCall := m.(backends.TextGenerator) // it tokenizes where it decodes
	if tok, ok := m.(backends.Tokenizer); ok && !inCall {
		gen.Prompt, err = tok.TokenizeContext(c.Request.Context(), prompt, true, true)
		if err != nil {
			h.Release()
			return nil, fmt.Errorf("tokenize the prompt: %w", err)
		}
		if len(gen.Prompt) == 0 {
			h.Release()
			return nil, BadRequest(param, "%s is empty", param)
		}
	}
	return s.StartTokens(c, h, m, gen, param)
}

// StartTokens starts gen on m, which h holds: the handle passes to the run,
// or is released when the start fails. A context overflow names param.
func (s *Core) StartTokens(c *gin.Context, h *cache.Handle, m ChatModel, gen backends.Request, param string) (*ChatRun, error) {
	events, err := m.Generate(c.Request.Context(), gen)
	if err != nil {
		h.Release()
		return nil, promptParam(err, param)
	}
	return &ChatRun{Events: accesslog.NoteEvents(c, events, len(gen.Prompt)), PromptTokens: len(gen.Prompt), handle: h}, nil
}

// promptParam gives a context overflow that names no field the request's
// prompt field, param; other errors pass unchanged.
func promptParam(err error, param string) error {
	var co *backends.ContextOverflowError
	if errors.As(err, &co) && co.Param == "" {
		named := *co
		named.Param = param
		return &named
	}
	return err
}

// chatResult is a whole generation, for the non-streamed answers.
type chatResult struct {
	Text      string
	Reasoning string
	ToolCalls []backends.ToolCall
	Finish    backends.FinishReason
	Stop      string // the stop string that ended it (backends.Event.Stop)
	Usage     backends.Usage
}

// ErrCut is collect's error for a generation the request's end cut short:
// answer with WriteCut (a 503 when the shutdown cut it, nothing when the
// client left).
var ErrCut = errors.New("generation cut short")

// Collect reads a generation of one choice to its end (CollectChoices).
func Collect(events <-chan backends.Event) (chatResult, error) {
	rs, _, err := CollectChoices(events, 1)
	if err != nil {
		return chatResult{}, err
	}
	return rs[0].chatResult, nil
}

// errGeneration is the error of a final event that says it failed without
// saying why.
var errGeneration = errors.New("generation failed")

// GenerationError is the error a stream's final event carries, or nil.
func GenerationError(ev backends.Event) error {
	switch {
	case ev.Err != nil:
		return fmt.Errorf("%w: %w", errGeneration, ev.Err)
	case ev.Finish == backends.FinishError:
		return errGeneration
	}
	return nil
}

// ChatPlan is a validated chat completion request.
type ChatPlan struct {
	Gen  backends.Request
	Msgs []backends.Message
	// bytes is the text the messages give the chat template, which a
	// rendered prompt holds at least; toolBytes the same of the tools
	// (ToolPromptBytes).
	Bytes, toolBytes int
	// param is the request field that holds the conversation.
	param string
}
