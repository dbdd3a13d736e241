package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// Wire types of the OpenAI chat and completions APIs, as modeld accepts and
// returns them. Fields modeld does not support are decoded so that a request
// using them gets a clear 400 instead of being silently ignored.

// MessageContent is a message's content: a string, or an array of parts of which
// modeld reads the text parts.
type MessageContent struct {
	Text    string
	NonText []string // types of parts modeld cannot read (input_audio, ...)
	// Parts are the typed parts when content was an array.
	Parts    []backends.ContentPart
	Null     bool
	provided bool
}

func (m *MessageContent) UnmarshalJSON(b []byte) error {
	m.provided = true
	if string(b) == "null" {
		m.Null = true
		return nil
	}
	if err := json.Unmarshal(b, &m.Text); err == nil {
		return nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
		InputAudio *struct {
			Data   []byte `json:"data"`
			Format string `json:"format"`
		} `json:"input_audio"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content must be a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		part := backends.ContentPart{WireType: p.Type}
		switch p.Type {
		case "text":
			sb.WriteString(p.Text)
			part.Type, part.Text = backends.PartText, p.Text
		case "image_url":
			part.Type = backends.PartImage
			if p.ImageURL != nil {
				part.URL = p.ImageURL.URL
			}
		case "input_audio":
			part.Type = backends.PartAudio
			if p.InputAudio != nil {
				part.Data, part.Format = p.InputAudio.Data, p.InputAudio.Format
			}
			m.NonText = append(m.NonText, p.Type)
		default:
			m.NonText = append(m.NonText, p.Type)
			continue
		}
		m.Parts = append(m.Parts, part)
	}
	m.Text = sb.String()
	return nil
}

type ChatMessage struct {
	Role       string          `json:"role"`
	Content    MessageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// ReasoningContent is a past assistant turn's reasoning, as this API
	// returns it; the chat template decides how it is rendered.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// FunctionCall is the legacy form of one tool call.
	FunctionCall *core.WireFunction `json:"function_call,omitempty"`
}

type ChatCompletionRequest struct {
	Model               string        `json:"model"`
	Messages            []ChatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	core.SamplingFields
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Functions and FunctionCall are the legacy forms of tools and
	// tool_choice.
	Functions      json.RawMessage          `json:"functions"`
	FunctionCall   json.RawMessage          `json:"function_call"`
	ResponseFormat *core.WireResponseFormat `json:"response_format"`
	// ChatTemplateKwargs are extra variables for the model's chat template
	// (as llama.cpp's server takes them), e.g. {"enable_thinking": false}.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
}

// message turns the i-th message into the internal model.
func (m *ChatMessage) message(i int) (backends.Message, error) {
	role := m.Role
	switch role {
	case "developer":
		role = "system"
	case "function": // legacy: a function's result, named by the function
		role = "tool"
	}
	bm := backends.Message{Role: role, Content: m.Content.Text, Parts: m.Content.Parts, Name: m.Name, ToolCallID: m.ToolCallID}
	if role == "assistant" {
		bm.Reasoning = m.ReasoningContent
	}
	if fc := m.FunctionCall; fc != nil && len(m.ToolCalls) == 0 {
		bm.ToolCalls = []backends.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: fc.Name, Arguments: fc.Arguments}}
	}
	if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
		var calls []core.WireToolCall
		if err := json.Unmarshal(m.ToolCalls, &calls); err != nil {
			param := fmt.Sprintf("messages[%d].tool_calls", i)
			return bm, core.BadRequest(param, "%s must be an array of {id, type: \"function\", function: {name, arguments}}", param)
		}
		for j, c := range calls {
			if c.Function.Name == "" || c.Type != "" && c.Type != "function" {
				param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
				return bm, core.BadRequest(param, "%s must be {id, type: \"function\", function: {name, arguments}}", param)
			}
			bm.ToolCalls = append(bm.ToolCalls, backends.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return bm, nil
}

// toolsParam names the field the request's tools came in: tools, or the
// legacy functions.
func (req *ChatCompletionRequest) toolsParam() string {
	if core.Given(req.Functions) && !core.Given(req.Tools) {
		return "functions"
	}
	return "tools"
}

// names are the request's field names (its tools came as tools or as the
// legacy functions).
func (req *ChatCompletionRequest) names() core.FieldNames {
	n := core.OpenAINames
	n.Tools = req.toolsParam()
	return n
}

// Tooling reads tools, tool_choice and response_format into gen. They are
// checked for shape and size (against ContextCap) here; whether the model
// can honour them is the backend's to say.
func (req *ChatCompletionRequest) Tooling(gen *backends.Request, env core.PlanEnv) error {
	contextCap := env.ContextCap
	var errs []error
	if core.Given(req.Tools) && core.Given(req.Functions) {
		errs = append(errs, core.BadRequest("functions", "send tools or the legacy functions, not both"))
	}
	if core.Given(req.ToolChoice) && core.Given(req.FunctionCall) {
		errs = append(errs, core.BadRequest("function_call", "send tool_choice or the legacy function_call, not both"))
	}
	var at []string // the request's path of each of gen.Tools
	if core.Given(req.Tools) {
		var tools []core.WireTool
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			errs = append(errs, core.BadRequest("tools", "tools must be an array of {type: \"function\", function: {name, ...}}"))
		} else if len(tools) > core.MaxTools {
			errs = append(errs, core.TooMany("tools", len(tools), core.MaxTools, "tools"))
		} else {
			for i, t := range tools {
				if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
					errs = append(errs, core.BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {type: \"function\", function: {name, ...}}", i))
					continue
				}
				at = append(at, fmt.Sprintf("tools[%d].function", i))
				gen.Tools = append(gen.Tools, backends.Tool{Name: t.Function.Name, Description: t.Function.Description,
					Parameters: t.Function.Parameters, Strict: t.Function.Strict})
			}
		}
	} else if core.Given(req.Functions) {
		var fns []wireFunctionDef
		if err := json.Unmarshal(req.Functions, &fns); err != nil {
			errs = append(errs, core.BadRequest("functions", "functions must be an array of {name, description, parameters}"))
		} else if len(fns) > core.MaxTools {
			errs = append(errs, core.TooMany("functions", len(fns), core.MaxTools, "functions"))
		} else {
			for i, f := range fns {
				at = append(at, fmt.Sprintf("functions[%d]", i))
				gen.Tools = append(gen.Tools, backends.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
			}
		}
	}
	errs = append(errs, core.CheckTools(gen.Tools, func(i int) string { return at[i] })...)
	for _, f := range []struct {
		raw  json.RawMessage
		wire core.ToolChoiceWire
	}{{req.FunctionCall, functionCallWire}, {req.ToolChoice, toolChoiceWire}} {
		if core.Given(f.raw) {
			choice, _, err := core.ParseToolChoice(f.raw, f.wire)
			if err != nil {
				errs = append(errs, err)
			} else {
				gen.ToolChoice = choice
			}
		}
	}
	if err := core.MeetToolChoice(gen, "tool_choice"); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	if err := core.ResponseFormat(req.ResponseFormat, gen, req.names(), env.Constraints); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// Tools too long for any context are refused before the grammar
		// reads them (a completion budget is checked with the messages).
		if err := core.CheckToolBytes(req.toolsParam(), gen.Tools, contextCap); err != nil {
			return err
		}
		// The calls' grammar, before any model is acquired: a parameters
		// schema that cannot be enforced is a 400 on tools naming the tool
		// and the keyword.
		gen.ToolChoice.Single = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
		if err := core.ToolGrammar(gen, req.names(), env.Constraints); err != nil {
			errs = append(errs, err)
		}
	}
	return core.JoinBadRequests(errs)
}

// wireFunctionDef is a legacy function definition.
type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openaiAPI are the OpenAI chat, completions, tokenize and embeddings handlers.
type openaiAPI struct{ *core.Core }

// Register adds the OpenAI routes (the model routes are the store's).
func Register(c *core.Core) {
	s := &openaiAPI{c}
	s.Engine.POST("/v1/chat/completions", s.chatCompletions)
	s.Engine.POST("/v1/completions", s.completions)
	s.Engine.POST("/v1/tokenize", s.tokenize)
	s.Engine.POST("/v1/detokenize", s.detokenize)
	s.Engine.POST("/v1/embeddings", s.embeddings)
}

// toolChoiceWire is OpenAI's tool_choice: "auto", "none", "required" or
// {"type": "function", "function": {"name": ...}}.
var toolChoiceWire = core.ToolChoiceWire{
	Field:   "tool_choice",
	Strings: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone, "required": backends.ToolChoiceRequired},
	Named:   []string{"function"}, NamePath: "function.name",
}

// functionCallWire is the legacy function_call: "auto", "none" or {"name": ...}.
var functionCallWire = core.ToolChoiceWire{
	Field:   "function_call",
	Strings: map[string]backends.ToolChoiceMode{"auto": backends.ToolChoiceAuto, "none": backends.ToolChoiceNone},
	Named:   []string{""}, NamePath: "name",
}
