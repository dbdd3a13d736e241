package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
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
	KeepAlive core.KeepAlive `json:"keep_alive"`
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
	// Source is an image block's: {type: base64, media_type, data} or
	// {type: url, url}.
	Source *anthropicImageSource `json:"source"`
}

// anthropicImageSource is where an image block's bytes are.
type anthropicImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// imagePart is an image block as an image part: base64 data decoded, a URL
// kept for the core (which fetches none). bp is the block's path.
func imagePart(bp string, src *anthropicImageSource) (backends.ContentPart, error) {
	part := backends.ContentPart{Type: backends.PartImage, WireType: "image"}
	switch {
	case src == nil:
		return part, core.BadRequest(bp+".source", "%s.source is required on an image block", bp)
	case src.Type == "base64":
		if int64(len(src.Data)) > 4*core.ImageLimits.MaxBytes/3+4 {
			return part, core.BadRequest(bp+".source.data", "%s.source.data is over the limit of %d bytes for one image", bp, core.ImageLimits.MaxBytes)
		}
		data, err := base64.StdEncoding.DecodeString(src.Data)
		if err != nil {
			return part, core.BadRequest(bp+".source.data", "%s.source.data is not base64", bp)
		}
		part.Data, part.Format = data, src.MediaType
	case src.Type == "url":
		part.URL = src.URL
	default:
		return part, core.BadRequest(bp+".source.type", "%s.source.type %s is not one of base64, url", bp, core.Quote(src.Type))
	}
	return part, nil
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

// toolChoiceWire is Anthropic's tool_choice: {"type": "auto"|"any"|"none"}
// or {"type": "tool", "name": ...}.
var toolChoiceWire = core.ToolChoiceWire{
	Field: "tool_choice",
	Types: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "any": backends.ToolChoiceRequired, "none": backends.ToolChoiceNone},
	Named: []string{"tool"}, NamePath: "name",
}

// anthropicToolChoice is tool_choice's flag beside the choice.
type anthropicToolChoice struct {
	DisableParallelToolUse bool `json:"disable_parallel_tool_use"`
}

// anthropicThinking is thinking: enabled (with a budget), adaptive or
// disabled.
type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// anthropicPlan is a translated request: the chat call.
type anthropicPlan struct {
	call core.ChatCall
}

// AnthropicPlanning is what plan needs besides the request.
type AnthropicPlanning struct {
	ContextCap  int
	Constraints backends.Constrainer
	// Count is true for count_tokens, which has no max_tokens.
	Count bool
	// keepBillingHeader keeps Claude Code's attribution line in the system
	// prompt (Options.KeepBillingHeader).
	keepBillingHeader bool
}

// Plan translates the request onto the internal model and checks it without
// a model.
func (req *AnthropicRequest) Plan(o AnthropicPlanning) (*anthropicPlan, error) {
	contextCap, count := o.ContextCap, o.Count
	var errs []error
	bad := func(param, format string, args ...any) { errs = append(errs, core.BadRequest(param, format, args...)) }
	if req.Model == "" {
		bad("model", "model is required")
	}
	if !count && req.MaxTokens == nil {
		bad("max_tokens", "max_tokens is required")
	}
	// max_tokens is a ceiling (clients send the model's largest output, 32000
	// and more): checked here against the largest context, bounded by what
	// the model's context leaves when the prompt is known (ChatCall.ceiling).
	var maxTokens *int
	if !count && req.MaxTokens != nil {
		mt := min(*req.MaxTokens, contextCap-1)
		maxTokens = &mt
	}
	stops := req.StopSequences // checked here, to name the field as Anthropic does
	if n := len(stops); n > core.MaxStopSequences {
		errs = append(errs, core.TooMany("stop_sequences", n, core.MaxStopSequences, "sequences"))
		stops = nil
	}
	for i, st := range stops {
		if st == "" || len(st) > core.MaxStopBytes {
			bad("stop_sequences", "stop_sequences[%d] must be 1 to %d bytes", i, core.MaxStopBytes)
			stops = nil
			break
		}
	}
	f := core.SamplingFields{MaxTemperature: 1, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Stop: stops, Speculative: req.Speculative}
	gen, err := f.Request("max_tokens", maxTokens, contextCap)
	if err != nil {
		errs = append(errs, err)
	}
	if core.Given(req.MCPServers) && string(req.MCPServers) != "[]" {
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
	call := core.ChatCall{Model: req.Model, KeepAlive: req.KeepAlive, Ceiling: true}
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
	if err := core.JoinBadRequests(errs); err != nil {
		return nil, err
	}
	if err := core.CompileTooling(&gen, core.FieldNames{Format: formatParam, Tools: "tools", Tool: "tool", Schema: "input_schema"},
		core.PlanEnv{ContextCap: contextCap, Constraints: o.Constraints}); err != nil {
		return nil, err
	}
	gen.MaxTokens = 0 // the prompt alone must fit; max_tokens bounds what is left
	if call.Plan, err = core.NewChatPlan(gen, msgs, contextCap, core.ConvFields{Conversation: "messages"}); err != nil {
		return nil, err
	}
	if maxTokens != nil {
		call.Plan.Gen.MaxTokens = *req.MaxTokens
	}
	return &anthropicPlan{call: call}, nil
}

// tooling reads tools and tool_choice into gen (and call.single).
func (req *AnthropicRequest) tooling(gen *backends.Request, call *core.ChatCall) error {
	var errs []error
	bad := func(param, format string, args ...any) { errs = append(errs, core.BadRequest(param, format, args...)) }
	if core.Given(req.Tools) {
		var tools []anthropicTool
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return core.BadRequest("tools", "tools must be an array of {name, description, input_schema}")
		}
		if len(tools) > core.MaxTools {
			return core.TooMany("tools", len(tools), core.MaxTools, "tools")
		}
		for i, t := range tools {
			p := fmt.Sprintf("tools[%d]", i)
			if t.Type != "" && t.Type != "custom" {
				bad(p+".type", "%s is Anthropic's built-in tool %s, which runs on Anthropic's servers; modeld does not run it: define a custom tool with an input_schema and run it in the client", p, core.Quote(t.Type))
				continue
			}
			tool := backends.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict}
			defined := func(name string) bool { return core.HasTool(gen.Tools, name) }
			errs = append(errs, core.CheckToolDef(tool, defined, core.ToolPaths{At: p, Schema: "input_schema", Required: true})...)
			gen.Tools = append(gen.Tools, tool)
		}
	}
	if core.Given(req.ToolChoice) {
		choice, _, err := core.ParseToolChoice(req.ToolChoice, toolChoiceWire)
		if err != nil {
			errs = append(errs, err)
		}
		gen.ToolChoice = choice
		var tc anthropicToolChoice
		_ = json.Unmarshal(req.ToolChoice, &tc) // the parser has refused what does not decode
		if tc.DisableParallelToolUse {
			gen.ToolChoice.Single, call.Single = true, true
		}
	}
	return core.JoinBadRequests(errs)
}

// thinking turns thinking on or off through the chat template's
// enable_thinking and thinking (Qwen3, DeepSeek V3.1 and the templates that
// follow them). Absent means
// off, as it does on Anthropic's API: a template's own default (on, for
// Qwen3) applies only to dialects without such a field. budget_tokens is
// checked as Anthropic checks it but not enforced apart from max_tokens,
// which bounds reasoning and answer together.
func (req *AnthropicRequest) thinking(call *core.ChatCall) error {
	if !core.Given(req.Thinking) {
		call.Vars = backends.ThinkingVars(nil, false)
		return nil
	}
	var th anthropicThinking
	if json.Unmarshal(req.Thinking, &th) != nil {
		return core.BadRequest("thinking", "thinking must be {type: enabled, budget_tokens} or {type: disabled}")
	}
	switch th.Type {
	case "enabled", "adaptive":
		if th.BudgetTokens != nil && *th.BudgetTokens < 1 {
			return core.BadRequest("thinking.budget_tokens", "thinking.budget_tokens must be at least 1")
		}
		call.Vars = backends.ThinkingVars(nil, true)
	case "disabled":
		call.Vars = backends.ThinkingVars(nil, false)
	default:
		return core.BadRequest("thinking.type", "thinking.type %s is not one of enabled, adaptive, disabled", core.Quote(th.Type))
	}
	return nil
}

// format reads structured output (output_config.format, or the older
// output_format) into gen: a JSON Schema the output must match, through
// the same grammar as OpenAI's response_format. param is the field read.
func (req *AnthropicRequest) format(gen *backends.Request) (param string, err error) {
	raw, param := req.OutputFormat, "output_format"
	if core.Given(req.OutputConfig) {
		var oc struct {
			Format json.RawMessage `json:"format"`
		}
		if json.Unmarshal(req.OutputConfig, &oc) != nil {
			return param, core.BadRequest("output_config", "output_config must be an object")
		}
		if core.Given(oc.Format) {
			raw, param = oc.Format, "output_config.format"
		}
	}
	if !core.Given(raw) {
		return param, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(raw, &f) != nil || f.Type != "json_schema" || !core.Given(f.Schema) {
		return param, core.BadRequest(param, "%s must be {type: json_schema, schema}", param)
	}
	gen.ResponseFormat = backends.ResponseFormat{Type: backends.FormatJSONSchema, Schema: f.Schema, Strict: true}
	return param, nil
}

// decode reads and translates a Messages request; the error is written.
func (s *anthropicAPI) anthropicDecode(c *gin.Context, count bool) (*AnthropicRequest, *anthropicPlan, bool) {
	var req AnthropicRequest
	if err := core.DecodePromptJSON(c, &req, "messages", s.ContextCap()); err != nil {
		WriteAnthropicError(c, err)
		return nil, nil, false
	}
	if len(req.ignored) > 0 {
		s.Log.Debug("anthropic messages: fields ignored", "path", c.Request.URL.Path, "fields", req.ignored)
	}
	plan, err := req.Plan(AnthropicPlanning{ContextCap: s.ContextCap(), Constraints: s.Opt.Constraints, Count: count, keepBillingHeader: s.Opt.KeepBillingHeader})
	if err != nil {
		WriteAnthropicError(c, err)
		return nil, nil, false
	}
	return &req, plan, true
}

func (s *anthropicAPI) anthropicMessages(c *gin.Context) {
	req, plan, ok := s.anthropicDecode(c, false)
	if !ok {
		return
	}
	run, err := s.StartChat(c, plan.call)
	if err != nil {
		WriteAnthropicError(c, err)
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
	if err := s.FetchImages(c.Request.Context(), plan.call.Plan.Msgs, "messages"); err != nil {
		WriteAnthropicError(c, err)
		return
	}
	h, model, err := s.AcquireChat(c, req.Model, req.KeepAlive)
	if err != nil {
		WriteAnthropicError(c, err)
		return
	}
	defer h.Release()
	gen := plan.call.Plan.Gen
	ctx := backends.WithTemplateVars(c.Request.Context(), plan.call.Vars)
	ids, rendered, err := core.ChatPromptIDs(ctx, model, &gen, plan.call.Plan.Msgs)
	if err == nil && !rendered {
		err = core.BadRequest("messages", "model %s renders chat messages itself; it has no prompt to count", core.Quote(req.Model))
	}
	if err != nil {
		WriteAnthropicError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"input_tokens": len(ids)})
}

// anthropicAPI are the Messages handlers.
type anthropicAPI struct{ *core.Core }

// Register adds the Messages routes.
func Register(c *core.Core) {
	s := &anthropicAPI{c}
	s.ErrorShapeOn(func(p string) bool { return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") }, anthropicShape)
	s.Engine.POST("/v1/messages", s.anthropicMessages)
	s.Engine.POST("/v1/messages/count_tokens", s.anthropicCountTokens)
}
