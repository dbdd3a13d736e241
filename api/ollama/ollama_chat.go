package ollama

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// Ollama's /api/chat and /api/generate, on the chat core.

// OllamaMessage is a message of /api/chat, in and out.
type OllamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	// ToolName names the tool whose result a "tool" message carries.
	ToolName string `json:"tool_name,omitempty"`
}

// OllamaChatRequest is the body of POST /api/chat.
type OllamaChatRequest struct {
	Model     string          `json:"model"`
	Messages  []OllamaMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Format    json.RawMessage `json:"format"`
	Options   ollamaOptions   `json:"options"`
	Stream    *bool           `json:"stream"`
	KeepAlive core.KeepAlive  `json:"keep_alive"`
	Think     json.RawMessage `json:"think"`
	Logprobs  bool            `json:"logprobs"`
}

// OllamaChatResponse is one object of /api/chat's answer.
type OllamaChatResponse struct {
	Model      string        `json:"model"`
	CreatedAt  time.Time     `json:"created_at"`
	Message    OllamaMessage `json:"message"`
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason,omitempty"`
	*ollamaStats
}

// OllamaGenerateRequest is the body of POST /api/generate.
type OllamaGenerateRequest struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	Suffix    string          `json:"suffix"`
	System    string          `json:"system"`
	Template  string          `json:"template"`
	Raw       bool            `json:"raw"`
	Images    []string        `json:"images"`
	Context   []int           `json:"context"`
	Format    json.RawMessage `json:"format"`
	Options   ollamaOptions   `json:"options"`
	Stream    *bool           `json:"stream"`
	KeepAlive core.KeepAlive  `json:"keep_alive"`
	Think     json.RawMessage `json:"think"`
	Logprobs  bool            `json:"logprobs"`
}

// OllamaGenerateResponse is one object of /api/generate's answer.
type OllamaGenerateResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Response   string    `json:"response"`
	Thinking   string    `json:"thinking,omitempty"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	*ollamaStats
}

// chatMessages turns Ollama's messages into the internal model. A tool
// call gets an id, and a tool result the id of the call it answers (the
// first unanswered call of its tool_name, else the first unanswered), for
// templates that link them.
func (req *OllamaChatRequest) chatMessages(h *ollama) ([]backends.Message, error) {
	type open struct{ id, name string }
	var pending []open
	var errs []error
	msgs := make([]backends.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		bm := backends.Message{Role: m.Role, Content: m.Content}
		switch m.Role {
		case "system", "user":
		case "assistant":
			for j, tc := range m.ToolCalls {
				if tc.Function.Name == "" {
					errs = append(errs, core.BadRequest(fmt.Sprintf("messages[%d].tool_calls[%d]", i, j), "messages[%d].tool_calls[%d] must be {function: {name, arguments}}", i, j))
					continue
				}
				args := string(tc.Function.Arguments)
				if !core.Given(tc.Function.Arguments) {
					args = "{}"
				}
				var s string // arguments sent as a JSON string are its text
				if json.Unmarshal(tc.Function.Arguments, &s) == nil {
					args = s
				}
				id := fmt.Sprintf("call_%d_%d", i, j)
				bm.ToolCalls = append(bm.ToolCalls, backends.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
				pending = append(pending, open{id, tc.Function.Name})
			}
			if m.Thinking != "" {
				h.s.Log.Debug("ollama: an assistant message's thinking is not given to the template", "message", i)
			}
		case "tool":
			bm.Name = m.ToolName
			at := -1
			for k, p := range pending {
				if m.ToolName == "" || p.name == m.ToolName {
					at = k
					break
				}
			}
			if at < 0 && len(pending) > 0 {
				at = 0
			}
			if at >= 0 {
				bm.ToolCallID = pending[at].id
				pending = append(pending[:at], pending[at+1:]...)
			}
		default:
			errs = append(errs, core.BadRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %s is not one of system, user, assistant, tool", i, core.Quote(m.Role)))
		}
		parts, err := imageParts(m.Images, fmt.Sprintf("messages[%d].images", i))
		if err != nil {
			errs = append(errs, err)
		}
		bm.Parts = append(bm.Parts, parts...)
		msgs = append(msgs, bm)
	}
	return msgs, core.JoinBadRequests(errs)
}

// tools reads Ollama's tools (the OpenAI chat shape) into gen.
func ollamaTools(raw json.RawMessage, gen *backends.Request) error {
	if !core.Given(raw) {
		return nil
	}
	var tools []core.WireTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return core.BadRequest("tools", "tools must be an array of {type: \"function\", function: {name, ...}}")
	}
	if len(tools) > core.MaxTools {
		return core.TooMany("tools", len(tools), core.MaxTools, "tools")
	}
	var errs []error
	for i, t := range tools {
		if t.Type != "" && t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			errs = append(errs, core.BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {type: \"function\", function: {name, ...}}", i))
			continue
		}
		tool := backends.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}
		defined := func(name string) bool { return core.HasTool(gen.Tools, name) }
		errs = append(errs, core.CheckToolDef(tool, defined, core.ToolPaths{At: fmt.Sprintf("tools[%d].function", i), Schema: "parameters"})...)
		gen.Tools = append(gen.Tools, tool)
	}
	return core.JoinBadRequests(errs)
}

func (h *ollama) chat(c *gin.Context) {
	tm := ollamaTiming{start: time.Now()}
	var req OllamaChatRequest
	if err := h.decode(c, &req, "messages"); err != nil {
		ollamaError(c, err, "")
		return
	}
	name := req.Model // answers name the model as the client did
	req.Model = ollamaID(req.Model)
	frame := func(text, thinking string, calls []ollamaToolCall, fin *ollamaFinal) any {
		r := OllamaChatResponse{Model: name, CreatedAt: time.Now().UTC(),
			Message: OllamaMessage{Role: "assistant", Content: text, Thinking: thinking, ToolCalls: calls}}
		if fin != nil {
			r.Done, r.DoneReason, r.ollamaStats = true, fin.reason, &fin.stats
		}
		return r
	}
	if len(req.Messages) == 0 {
		reason, err := h.loadOrUnload(c, req.Model, req.KeepAlive)
		if err != nil {
			ollamaError(c, h.taskError(err, name, "chat"), name)
			return
		}
		c.JSON(200, OllamaChatResponse{Model: name, CreatedAt: time.Now().UTC(), Message: OllamaMessage{Role: "assistant"}, Done: true, DoneReason: reason})
		return
	}
	call, err := h.chatCall(&req)
	if err != nil {
		ollamaError(c, err, name)
		return
	}
	run, err := h.s.StartChat(c, call)
	if err != nil {
		ollamaError(c, h.taskError(err, name, "chat"), name)
		return
	}
	defer run.Release()
	tm.load = time.Since(tm.start)
	h.writeRun(c, run, name, streamOf(req.Stream), tm, frame)
}

// ChatCall checks a chat request without a model and plans it.
func (h *ollama) chatCall(req *OllamaChatRequest) (core.ChatCall, error) {
	if req.Logprobs {
		return core.ChatCall{}, errOllamaLogprobs
	}
	opts, err := req.Options.read(h)
	if err != nil {
		return core.ChatCall{}, err
	}
	gen, err := opts.request(h.s, req.Format)
	if err != nil {
		return core.ChatCall{}, err
	}
	vars, err := ollamaThink(req.Think)
	if err != nil {
		return core.ChatCall{}, err
	}
	msgs, err := req.chatMessages(h)
	if err != nil {
		return core.ChatCall{}, err
	}
	if err := ollamaTools(req.Tools, &gen); err != nil {
		return core.ChatCall{}, err
	}
	if err := core.CompileTooling(&gen, ollamaNames, h.s.PlanEnv()); err != nil {
		return core.ChatCall{}, err
	}
	plan, err := core.NewChatPlan(gen, msgs, h.s.ContextCap(), core.ConvFields{Conversation: "messages"})
	if err != nil {
		return core.ChatCall{}, err
	}
	return core.ChatCall{Model: req.Model, KeepAlive: req.KeepAlive, Plan: plan, Vars: vars}, nil
}

func (h *ollama) generate(c *gin.Context) {
	tm := ollamaTiming{start: time.Now()}
	var req OllamaGenerateRequest
	if err := h.decode(c, &req, "prompt"); err != nil {
		ollamaError(c, err, "")
		return
	}
	name := req.Model // answers name the model as the client did
	req.Model = ollamaID(req.Model)
	frame := func(text, thinking string, _ []ollamaToolCall, fin *ollamaFinal) any {
		r := OllamaGenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Response: text, Thinking: thinking}
		if fin != nil {
			r.Done, r.DoneReason, r.ollamaStats = true, fin.reason, &fin.stats
		}
		return r
	}
	if req.Prompt == "" && req.Suffix == "" && len(req.Images) == 0 {
		reason, err := h.loadOrUnload(c, req.Model, req.KeepAlive)
		if err != nil {
			ollamaError(c, h.taskError(err, name, "generate"), name)
			return
		}
		c.JSON(200, OllamaGenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason})
		return
	}
	run, err := h.startGenerate(c, &req)
	if err != nil {
		ollamaError(c, h.taskError(err, name, "generate"), name)
		return
	}
	defer run.Release()
	tm.load = time.Since(tm.start)
	h.writeRun(c, run, name, streamOf(req.Stream), tm, frame)
}

// startGenerate checks a generate request and starts it: a templated
// prompt (system, then the prompt as the user's turn) through the chat
// core, a raw prompt as it is, or a fill-in-the-middle prompt.
func (h *ollama) startGenerate(c *gin.Context, req *OllamaGenerateRequest) (*core.ChatRun, error) {
	switch {
	case req.Template != "":
		return nil, core.BadRequest("template", "template is not supported: modeld renders the model's own chat template; template the prompt yourself and send it with raw: true")
	case len(req.Context) > 0:
		return nil, core.BadRequest("context", "context is not supported (Ollama deprecates it): send the conversation to /api/chat")
	case len(req.Images) > 0 && (req.Raw || req.Suffix != ""):
		return nil, core.BadRequest("images", "images go through the model's chat template: send them without raw and suffix")
	case req.Logprobs:
		return nil, errOllamaLogprobs
	case req.Suffix != "" && req.Raw:
		return nil, core.BadRequest("suffix", "suffix cannot be used with raw: true; send the prefix as prompt and the suffix, without raw")
	}
	opts, err := req.Options.read(h)
	if err != nil {
		return nil, err
	}
	gen, err := opts.request(h.s, req.Format)
	if err != nil {
		return nil, err
	}
	vars, err := ollamaThink(req.Think)
	if err != nil {
		return nil, err
	}
	if err := core.CompileTooling(&gen, ollamaNames, h.s.PlanEnv()); err != nil {
		return nil, err
	}
	switch {
	case req.Suffix != "":
		return h.startInfill(c, req, gen)
	case req.Raw:
		return h.s.StartText(c, req.Model, req.KeepAlive, gen, req.Prompt, "prompt")
	}
	var msgs []backends.Message
	if req.System != "" {
		msgs = append(msgs, backends.Message{Role: "system", Content: req.System})
	}
	parts, err := imageParts(req.Images, "images")
	if err != nil {
		return nil, err
	}
	msgs = append(msgs, backends.Message{Role: "user", Content: req.Prompt, Parts: parts})
	plan, err := core.NewChatPlan(gen, msgs, h.s.ContextCap(), core.ConvFields{Conversation: "prompt"})
	if err != nil {
		return nil, err
	}
	return h.s.StartChat(c, core.ChatCall{Model: req.Model, KeepAlive: req.KeepAlive, Plan: plan, Vars: vars})
}

// ollamaNames are the Ollama API's field names.
var ollamaNames = core.FieldNames{Format: "format", Tools: "tools", Tool: "function", Schema: "parameters"}

// errOllamaLogprobs refuses logprobs, which this dialect does not return.
var errOllamaLogprobs = core.BadRequest("logprobs", "logprobs is not supported on the Ollama API; POST /v1/chat/completions returns them")

// startInfill runs a generate request with a suffix as a fill-in-the-middle
// prompt, which the model makes from its vocabulary's own FIM tokens; a
// model without them is a 400. The model is acquired once: the prompt is
// made and the generation started under the same slot.
func (h *ollama) startInfill(c *gin.Context, req *OllamaGenerateRequest, gen backends.Request) (*core.ChatRun, error) {
	hd, m, err := h.s.AcquireChat(c, req.Model, req.KeepAlive)
	if err != nil {
		return nil, err
	}
	inf, ok := backends.Unwrap(m).(backends.Infiller)
	if !ok {
		hd.Release()
		return nil, noInfill(req.Model)
	}
	ids, err := inf.InfillPromptContext(c.Request.Context(), req.Prompt, req.Suffix)
	if errors.Is(err, backends.ErrNoInfill) {
		err = noInfill(req.Model)
	}
	if err != nil {
		hd.Release()
		return nil, err
	}
	gen.Prompt = ids
	return h.s.StartTokens(c, hd, m, gen, "prompt")
}

func noInfill(model string) error {
	return core.BadRequest("suffix", "model '%s' has no fill-in-the-middle tokens, so suffix cannot be used with it", core.Clip(model))
}

// imageParts are Ollama's images (base64, without a data: prefix) as image
// parts; the core decodes and bounds them. param names the field.
func imageParts(images []string, param string) ([]backends.ContentPart, error) {
	if len(images) > core.ImageLimits.MaxImages {
		return nil, core.TooMany(param, len(images), core.ImageLimits.MaxImages, "images")
	}
	var parts []backends.ContentPart
	for j, img := range images {
		if int64(len(img)) > 4*core.ImageLimits.MaxBytes/3+4 {
			return nil, core.BadRequest(fmt.Sprintf("%s[%d]", param, j), "%s[%d] is over the limit of %d bytes for one image", param, j, core.ImageLimits.MaxBytes)
		}
		data, err := base64.StdEncoding.DecodeString(img)
		if err != nil {
			return nil, core.BadRequest(fmt.Sprintf("%s[%d]", param, j), "%s[%d] is not base64 image data", param, j)
		}
		parts = append(parts, backends.ContentPart{Type: backends.PartImage, Data: data, WireType: "images"})
	}
	return parts, nil
}
