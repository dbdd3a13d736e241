package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
)

// The Anthropic Messages dialect: POST /v1/messages (also ?beta=true) and
// POST /v1/messages/count_tokens. It decodes Anthropic's wire shapes onto
// the one internal request (chatcore.go runs it) and encodes the events
// back as a message or as Anthropic's server-sent events
// (anthropic_stream.go). It renders no template, parses no tool call and
// builds no grammar of its own.

// AnthropicRequest is the body of POST /v1/messages (and, without
// max_tokens, of count_tokens).
type AnthropicRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	System        json.RawMessage    `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	Tools         json.RawMessage    `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Thinking      json.RawMessage    `json:"thinking"`
	Stream        bool               `json:"stream"`
	// OutputConfig carries structured output (format) beside fields modeld
	// does not use (effort); OutputFormat is its older beta spelling.
	OutputConfig json.RawMessage `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"`
	MCPServers   json.RawMessage `json:"mcp_servers"`
	// KeepAlive is modeld's own: how long the model stays loaded after.
	KeepAlive KeepAlive `json:"keep_alive"`
	// Speculative is modeld's own: prompt-lookup decoding on or off for
	// this request; absent keeps the model's setting.
	Speculative *bool `json:"speculative"`

	// ignored are the fields sent that modeld reads nothing from.
	ignored []string
}

// anthropicFields are the request fields AnthropicRequest reads, and those
// it accepts without reading: they do not change the answer modeld gives
// (metadata, caching hints, context management of the client's own history,
// service tiers and containers of tools modeld does not run).
var anthropicFields = map[string]bool{
	"model": true, "max_tokens": true, "system": true, "messages": true, "tools": true, "tool_choice": true,
	"stop_sequences": true, "temperature": true, "top_p": true, "top_k": true, "thinking": true, "stream": true,
	"output_config": true, "output_format": true, "mcp_servers": true, "keep_alive": true, "speculative": true,
}

func (r *AnthropicRequest) UnmarshalJSON(b []byte) error {
	type plain AnthropicRequest
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) == nil {
		for k := range fields {
			if !anthropicFields[k] {
				r.ignored = append(r.ignored, k)
			}
		}
		sort.Strings(r.ignored)
	}
	return nil
}

// anthropicMessage is one turn: content is a string or an array of blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicInBlock is a content block of a request, any type.
type anthropicInBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicTool is a tool definition: a custom tool (no type, or
// "custom") with an input_schema, or one of Anthropic's built-in tools,
// which modeld does not run.
type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      bool            `json:"strict"`
}

// anthropicToolChoice is tool_choice.
type anthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// anthropicThinking is thinking: enabled (with a budget), adaptive or
// disabled.
type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// anthropicPlan is a translated request: the chat call.
type anthropicPlan struct {
	call chatCall
}

// anthropicPlanning is what plan needs besides the request.
type anthropicPlanning struct {
	contextCap  int
	constraints backends.Constrainer
	// count is true for count_tokens, which has no max_tokens.
	count bool
	// keepBillingHeader keeps Claude Code's attribution line in the system
	// prompt (Options.KeepBillingHeader).
	keepBillingHeader bool
}

// plan translates the request onto the internal model and checks it without
// a model.
func (req *AnthropicRequest) plan(o anthropicPlanning) (*anthropicPlan, error) {
	contextCap, count := o.contextCap, o.count
	var errs []error
	bad := func(param, format string, args ...any) { errs = append(errs, badRequest(param, format, args...)) }
	if req.Model == "" {
		bad("model", "model is required")
	}
	if !count && req.MaxTokens == nil {
		bad("max_tokens", "max_tokens is required")
	}
	// max_tokens is a ceiling (clients send the model's largest output, 32000
	// and more): checked here against the largest context, bounded by what
	// the model's context leaves when the prompt is known (chatCall.ceiling).
	var maxTokens *int
	if !count && req.MaxTokens != nil {
		mt := min(*req.MaxTokens, contextCap-1)
		maxTokens = &mt
	}
	stops := req.StopSequences // checked here, to name the field as Anthropic does
	if n := len(stops); n > MaxStopSequences {
		errs = append(errs, tooMany("stop_sequences", n, MaxStopSequences, "sequences"))
		stops = nil
	}
	for i, st := range stops {
		if st == "" || len(st) > MaxStopBytes {
			bad("stop_sequences", "stop_sequences[%d] must be 1 to %d bytes", i, MaxStopBytes)
			stops = nil
			break
		}
	}
	f := samplingFields{maxTemperature: 1, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Stop: stops, Speculative: req.Speculative}
	gen, err := f.request("max_tokens", maxTokens, contextCap)
	if err != nil {
		errs = append(errs, err)
	}
	if given(req.MCPServers) && string(req.MCPServers) != "[]" {
		bad("mcp_servers", "mcp_servers is not supported: modeld does not connect to MCP servers; run the tools in the client and send them as tools")
	}
	msgs, err := req.system(o.keepBillingHeader)
	if err != nil {
		errs = append(errs, err)
	}
	if len(req.Messages) == 0 {
		bad("messages", "messages must not be empty")
	}
	for i, m := range req.Messages {
		ms, err := m.translate(i, o.keepBillingHeader)
		if err != nil {
			errs = append(errs, err)
		}
		msgs = append(msgs, ms...)
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
		bad(fmt.Sprintf("messages[%d]", n-1), "the last message is the assistant's: continuing a partial assistant turn (prefill) is not supported; end with a user message")
	}
	call := chatCall{model: req.Model, keepAlive: req.KeepAlive, ceiling: true}
	if err := req.tooling(&gen, &call); err != nil {
		errs = append(errs, err)
	}
	if err := req.thinking(&call); err != nil {
		errs = append(errs, err)
	}
	formatParam, err := req.format(&gen)
	if err != nil {
		errs = append(errs, err)
	}
	if err := joinBadRequests(errs); err != nil {
		return nil, err
	}
	if err := compileTooling(&gen, fieldNames{format: formatParam, tools: "tools", tool: "tool", schema: "input_schema"},
		planEnv{contextCap: contextCap, constraints: o.constraints}); err != nil {
		return nil, err
	}
	gen.MaxTokens = 0 // the prompt alone must fit; max_tokens bounds what is left
	if call.plan, err = newChatPlan(gen, msgs, contextCap, convFields{conversation: "messages"}); err != nil {
		return nil, err
	}
	if maxTokens != nil {
		call.plan.gen.MaxTokens = *req.MaxTokens
	}
	return &anthropicPlan{call: call}, nil
}

// tooling reads tools and tool_choice into gen (and call.single).
func (req *AnthropicRequest) tooling(gen *backends.Request, call *chatCall) error {
	var errs []error
	bad := func(param, format string, args ...any) { errs = append(errs, badRequest(param, format, args...)) }
	if given(req.Tools) {
		var tools []anthropicTool
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return badRequest("tools", "tools must be an array of {name, description, input_schema}")
		}
		if len(tools) > MaxTools {
			return tooMany("tools", len(tools), MaxTools, "tools")
		}
		for i, t := range tools {
			p := fmt.Sprintf("tools[%d]", i)
			if t.Type != "" && t.Type != "custom" {
				bad(p+".type", "%s is Anthropic's built-in tool %s, which runs on Anthropic's servers; modeld does not run it: define a custom tool with an input_schema and run it in the client", p, quote(t.Type))
				continue
			}
			tool := backends.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict}
			defined := func(name string) bool { return hasTool(gen.Tools, name) }
			errs = append(errs, checkToolDef(tool, defined, toolPaths{at: p, schema: "input_schema", required: true})...)
			gen.Tools = append(gen.Tools, tool)
		}
	}
	if given(req.ToolChoice) {
		var tc anthropicToolChoice
		if json.Unmarshal(req.ToolChoice, &tc) != nil {
			return joinBadRequests(append(errs, badRequest("tool_choice", "tool_choice must be {type: auto|any|tool|none}")))
		}
		switch tc.Type {
		case "auto":
			gen.ToolChoice.Mode = backends.ToolChoiceAuto
		case "any":
			gen.ToolChoice.Mode = backends.ToolChoiceRequired
		case "tool":
			if tc.Name == "" {
				bad("tool_choice.name", "tool_choice of type tool needs a name")
			}
			gen.ToolChoice = backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: tc.Name}
		case "none":
			gen.ToolChoice.Mode = backends.ToolChoiceNone
		default:
			bad("tool_choice.type", "tool_choice.type %s is not one of auto, any, tool, none", quote(tc.Type))
		}
		if tc.DisableParallelToolUse {
			gen.ToolChoice.Single, call.single = true, true
		}
	}
	return joinBadRequests(errs)
}

// thinking turns thinking on or off through the chat template's
// enable_thinking and thinking (Qwen3, DeepSeek V3.1 and the templates that
// follow them). Absent means
// off, as it does on Anthropic's API: a template's own default (on, for
// Qwen3) applies only to dialects without such a field. budget_tokens is
// checked as Anthropic checks it but not enforced apart from max_tokens,
// which bounds reasoning and answer together.
func (req *AnthropicRequest) thinking(call *chatCall) error {
	if !given(req.Thinking) {
		call.vars = backends.ThinkingVars(nil, false)
		return nil
	}
	var th anthropicThinking
	if json.Unmarshal(req.Thinking, &th) != nil {
		return badRequest("thinking", "thinking must be {type: enabled, budget_tokens} or {type: disabled}")
	}
	switch th.Type {
	case "enabled", "adaptive":
		if th.BudgetTokens != nil && *th.BudgetTokens < 1 {
			return badRequest("thinking.budget_tokens", "thinking.budget_tokens must be at least 1")
		}
		call.vars = backends.ThinkingVars(nil, true)
	case "disabled":
		call.vars = backends.ThinkingVars(nil, false)
	default:
		return badRequest("thinking.type", "thinking.type %s is not one of enabled, adaptive, disabled", quote(th.Type))
	}
	return nil
}

// format reads structured output (output_config.format, or the older
// output_format) into gen: a JSON Schema the output must match, through
// the same grammar as OpenAI's response_format. param is the field read.
func (req *AnthropicRequest) format(gen *backends.Request) (param string, err error) {
	raw, param := req.OutputFormat, "output_format"
	if given(req.OutputConfig) {
		var oc struct {
			Format json.RawMessage `json:"format"`
		}
		if json.Unmarshal(req.OutputConfig, &oc) != nil {
			return param, badRequest("output_config", "output_config must be an object")
		}
		if given(oc.Format) {
			raw, param = oc.Format, "output_config.format"
		}
	}
	if !given(raw) {
		return param, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(raw, &f) != nil || f.Type != "json_schema" || !given(f.Schema) {
		return param, badRequest(param, "%s must be {type: json_schema, schema}", param)
	}
	gen.ResponseFormat = backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: f.Schema, Strict: true}
	return param, nil
}

// decode reads and translates a Messages request; the error is written.
func (s *anthropicAPI) anthropicDecode(c *gin.Context, count bool) (*AnthropicRequest, *anthropicPlan, bool) {
	var req AnthropicRequest
	if err := decodePromptJSON(c, &req, "messages", s.contextCap()); err != nil {
		writeAnthropicError(c, err)
		return nil, nil, false
	}
	if len(req.ignored) > 0 {
		s.log.Debug("anthropic messages: fields ignored", "path", c.Request.URL.Path, "fields", req.ignored)
	}
	plan, err := req.plan(anthropicPlanning{contextCap: s.contextCap(), constraints: s.opt.Constraints, count: count, keepBillingHeader: s.opt.KeepBillingHeader})
	if err != nil {
		writeAnthropicError(c, err)
		return nil, nil, false
	}
	return &req, plan, true
}

func (s *anthropicAPI) anthropicMessages(c *gin.Context) {
	req, plan, ok := s.anthropicDecode(c, false)
	if !ok {
		return
	}
	run, err := s.startChat(c, plan.call)
	if err != nil {
		writeAnthropicError(c, err)
		return
	}
	defer run.Release()
	if req.Stream {
		s.anthropicStream(c, run, req.Model, plan)
		return
	}
	s.anthropicMessage(c, run, req.Model, plan)
}

// anthropicCountTokens answers count_tokens with the length of the prompt
// the same request's generation sees (the /v1/tokenize path): usage's
// input_tokens plus cache_read_input_tokens of that generation.
func (s *anthropicAPI) anthropicCountTokens(c *gin.Context) {
	req, plan, ok := s.anthropicDecode(c, true)
	if !ok {
		return
	}
	h, model, err := s.acquireChat(c, req.Model, req.KeepAlive)
	if err != nil {
		writeAnthropicError(c, err)
		return
	}
	defer h.Release()
	gen := plan.call.plan.gen
	ctx := backends.WithTemplateVars(c.Request.Context(), plan.call.vars)
	ids, rendered, err := chatPromptIDs(ctx, model, &gen, plan.call.plan.msgs)
	if err == nil && !rendered {
		err = badRequest("messages", "model %s renders chat messages itself; it has no prompt to count", quote(req.Model))
	}
	if err != nil {
		writeAnthropicError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"input_tokens": len(ids)})
}

// anthropicAPI are the Messages handlers.
type anthropicAPI struct{ *Core }

// registerAnthropic adds the Messages routes.
func registerAnthropic(c *Core) {
	s := &anthropicAPI{c}
	s.errorShapeOn(func(p string) bool { return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") }, anthropicShape)
	s.engine.POST("/v1/messages", s.anthropicMessages)
	s.engine.POST("/v1/messages/count_tokens", s.anthropicCountTokens)
}
