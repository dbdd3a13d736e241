// Package chattmpl renders a model's chat template the way Hugging Face's
// apply_chat_template does: it turns modeld's messages and tools into the
// template's variables (messages, tools, documents, add_generation_prompt,
// bos_token, eos_token, the request's chat_template_kwargs) and renders
// them with internal/jinja under a budget.
//
// It owns that mapping and the documented polyfill for templates that
// refuse a system message. It must not tokenize or know about a runtime:
// it has no native dependencies, so the importer can check a template
// before a model is ever loaded.
package chattmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/jinja"
)

// ErrBudget: the template ran past its render budget.
var ErrBudget = jinja.ErrBudget

// InputError is a request that cannot become template variables (a tool's
// parameters that are not JSON).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Template is a compiled chat template.
type Template struct {
	t *jinja.Template
	// thinkingField: the template reads a past turn's reasoning from
	// message.thinking (as gpt-oss's does) rather than reasoning_content.
	thinkingField bool
}

// Compile compiles a chat template's source.
func Compile(src string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	return &Template{t: t, thinkingField: strings.Contains(src, ".thinking") || strings.Contains(src, "['thinking']") || strings.Contains(src, `["thinking"]`)}, nil
}

// Input is one rendering's conversation and settings.
type Input struct {
	Messages []backends.Message
	Tools    []backends.Tool
	// AddGenerationPrompt ends the prompt with the opening of an
	// assistant turn.
	AddGenerationPrompt bool
	// BOS and EOS are the texts of the vocabulary's special tokens.
	BOS, EOS string
	// Kwargs are the request's chat_template_kwargs. They cannot replace
	// messages, tools, documents, add_generation_prompt or the special
	// tokens.
	Kwargs map[string]any
	// Thinking, when set, is the dialect's reasoning switch, given to the
	// template as enable_thinking and thinking (unless Kwargs set those).
	// Unset leaves the template's own default.
	Thinking *bool
	// Now is strftime_now's clock (time.Now when nil).
	Now    func() time.Time
	Budget jinja.Budget

	emptyTools  bool // PolyfillTools: tools is [] rather than None
	describeAll bool // PolyfillDescriptions
}

// reserved are the variables that Kwargs cannot replace.
var reserved = map[string]bool{"messages": true, "tools": true, "documents": true,
	"add_generation_prompt": true, "bos_token": true, "eos_token": true}

// Vars are the template's variables for in, as apply_chat_template passes
// them: messages as OpenAI-shaped dicts, tools as OpenAI's function tools
// (None when there are none), documents None.
func (t *Template) Vars(in Input) (map[string]any, error) {
	vars := map[string]any{}
	if in.Thinking != nil {
		vars["enable_thinking"] = *in.Thinking
		vars["thinking"] = *in.Thinking
	}
	for k, v := range in.Kwargs {
		if reserved[k] {
			continue
		}
		vars[k] = kwargValue(v)
	}
	msgs := make([]any, len(in.Messages))
	for i, m := range in.Messages {
		d, err := messageMap(m, t.thinkingField)
		if err != nil {
			return nil, err
		}
		msgs[i] = d
	}
	vars["messages"] = msgs
	vars["tools"] = nil
	if in.emptyTools {
		vars["tools"] = []any{}
	}
	if len(in.Tools) > 0 {
		tools, err := toolList(in.Tools, in.describeAll)
		if err != nil {
			return nil, err
		}
		vars["tools"] = tools
	}
	vars["documents"] = nil
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	vars["bos_token"] = in.BOS
	vars["eos_token"] = in.EOS
	return vars, nil
}

// kwargValue is a chat_template_kwargs value (decoded JSON) as the
// template reads it: an integer stays an integer (JSON decoding made it a
// float64), objects keep their keys, sorted (the decoding lost the order).
func kwargValue(v any) any {
	switch v.(type) {
	case nil, bool, string:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	jv, err := jinja.FromJSON(b)
	if err != nil {
		return v
	}
	return jv
}

// messageMap is a message as a template reads it: role, content (a string,
// "" for an assistant turn that only calls tools), reasoning_content (and
// thinking, for templates that read that), name,
// tool_calls (arguments as an object when they are a JSON object, as
// templates render them with tojson) and tool_call_id.
func messageMap(m backends.Message, thinkingField bool) (*jinja.Map, error) {
	d := jinja.NewMap()
	d.Set("role", m.Role)
	d.Set("content", m.Content)
	if m.Reasoning != "" {
		d.Set("reasoning_content", m.Reasoning)
		if thinkingField {
			d.Set("thinking", m.Reasoning)
		}
	}
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			fn := jinja.NewMap()
			fn.Set("name", c.Name)
			fn.Set("arguments", arguments(c.Arguments))
			call := jinja.NewMap()
			if c.ID != "" {
				call.Set("id", c.ID)
			}
			call.Set("type", "function")
			call.Set("function", fn)
			calls[i] = call
		}
		d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", m.ToolCallID)
	}
	return d, nil
}

// arguments are a tool call's arguments: the object when they are a JSON
// object, else the text.
func arguments(s string) any {
	if v, err := jinja.FromJSON([]byte(s)); err == nil {
		if m, ok := v.(*jinja.Map); ok {
			return m
		}
	}
	return s
}

func toolList(tools []backends.Tool, describeAll bool) ([]any, error) {
	out := make([]any, len(tools))
	for i, t := range tools {
		fn := jinja.NewMap()
		fn.Set("name", t.Name)
		if t.Description != "" || describeAll {
			fn.Set("description", t.Description)
		}
		if len(t.Parameters) > 0 {
			p, err := jinja.FromJSON(t.Parameters)
			if err != nil {
				return nil, &InputError{fmt.Errorf("tool %q: parameters: %w", clip(t.Name), err)}
			}
			if describeAll {
				describeProperties(p)
			}
			fn.Set("parameters", p)
		}
		d := jinja.NewMap()
		d.Set("type", "function")
		d.Set("function", fn)
		out[i] = d
	}
	return out, nil
}

// describeProperties gives each property of a parameters schema without a
// description an empty one.
func describeProperties(schema any) {
	m, ok := schema.(*jinja.Map)
	if !ok {
		return
	}
	props, _ := m.Get("properties")
	pm, ok := props.(*jinja.Map)
	if !ok {
		return
	}
	for _, k := range pm.Keys() {
		p, _ := pm.Get(k)
		if d, ok := p.(*jinja.Map); ok {
			if _, has := d.Get("description"); !has {
				d.Set("description", "")
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Render renders in with the template.
func (t *Template) Render(in Input) (string, error) {
	vars, err := t.Vars(in)
	if err != nil {
		return "", err
	}
	return t.t.Render(vars, jinja.Options{Budget: in.Budget, Now: in.Now})
}

// Polyfill names what RenderPolyfilled changed to render a conversation
// the template refuses as it is.
type Polyfill string

// The polyfills, tried in this order.
const (
	// PolyfillNone: the template rendered the conversation as it is.
	PolyfillNone Polyfill = ""
	// PolyfillSystem: the template raised on a conversation with system
	// messages; each is merged into the user turn after it (its text, a
	// blank line, then the user's), as llama.cpp's server does for
	// templates without a system role.
	PolyfillSystem Polyfill = "system merged into the next user turn"
	// PolyfillTools: a tool-use template failed on a chat without tools
	// (it iterates tools without checking); tools is an empty list.
	PolyfillTools Polyfill = "tools given as an empty list"
	// PolyfillDescriptions: a template failed on tools without a
	// description (it reads one unconditionally); each tool, and each
	// property of its parameters, without one gets an empty one.
	PolyfillDescriptions Polyfill = "empty descriptions for undescribed tools"
)

// Polyfilled is in as polyfill p changes it; ok is false when p does not
// apply to in.
func Polyfilled(in Input, p Polyfill) (Input, bool) {
	switch p {
	case PolyfillSystem:
		merged, ok := MergeSystem(in.Messages)
		in.Messages = merged
		return in, ok
	case PolyfillTools:
		in.emptyTools = true
		return in, len(in.Tools) == 0
	case PolyfillDescriptions:
		in.describeAll = true
		return in, len(in.Tools) > 0
	}
	return in, p == PolyfillNone
}

// RenderPolyfilled is Render, then the polyfills in order when the
// template refuses the conversation as it is; it reports which one
// rendered. When none does, the error is the template's own complaint
// about the conversation as sent. A budget error is never retried. A
// template's raise_exception is answered only by PolyfillSystem (the
// template's rule may be about the system role); its other failures
// (reading what the conversation lacks) by PolyfillTools or
// PolyfillDescriptions.
func (t *Template) RenderPolyfilled(in Input) (string, Polyfill, error) {
	out, err := t.Render(in)
	if err == nil || errors.Is(err, jinja.ErrBudget) {
		return out, PolyfillNone, err
	}
	var bad *InputError
	if errors.As(err, &bad) {
		return "", PolyfillNone, err
	}
	tries := []Polyfill{PolyfillTools, PolyfillDescriptions}
	if errors.Is(err, jinja.ErrRaised) {
		tries = []Polyfill{PolyfillSystem}
	}
	for _, p := range tries {
		if pin, ok := Polyfilled(in, p); ok {
			if out, err2 := t.Render(pin); err2 == nil {
				return out, p, nil
			}
		}
	}
	return "", PolyfillNone, err
}

// MergeSystem merges each system message into the next user message (a
// trailing one becomes a user message); ok is false when there is none.
func MergeSystem(msgs []backends.Message) ([]backends.Message, bool) {
	var out []backends.Message
	var pending []string
	found := false
	for _, m := range msgs {
		if m.Role == "system" {
			found = true
			pending = append(pending, m.Content)
			continue
		}
		if m.Role == "user" && len(pending) > 0 {
			m.Content = strings.Join(append(pending, m.Content), "\n\n")
			m.Parts = nil
			pending = nil
		}
		out = append(out, m)
	}
	if len(pending) > 0 {
		out = append(out, backends.Message{Role: "user", Content: strings.Join(pending, "\n\n")})
	}
	return out, found
}

// Sample is the conversation a template is checked against at import: a
// system prompt, a user turn, an assistant turn and a generation prompt.
func Sample() Input {
	return Input{
		Messages: []backends.Message{
			{Role: "system", Content: "You are a helpful assistant."},
			{Role: "user", Content: "Hello"},
			{Role: "assistant", Content: "Hi! How can I help?"},
			{Role: "user", Content: "Tell me a joke."},
		},
		AddGenerationPrompt: true,
		BOS:                 "<s>",
		EOS:                 "</s>",
		Now:                 func() time.Time { return time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC) },
	}
}

// Check compiles src and renders it once against Sample under budget, so
// that a template that does not parse, or that blows the budget on a plain
// chat, is refused before any model runs it. A template that refuses or
// fails on the sample otherwise passes: that is its rule about a
// conversation (a request gets the template's own error).
func Check(src string, budget jinja.Budget) error {
	t, err := Compile(src)
	if err != nil {
		return fmt.Errorf("chat template does not parse: %w", err)
	}
	in := Sample()
	in.Budget = budget
	if _, _, err := t.RenderPolyfilled(in); errors.Is(err, jinja.ErrBudget) {
		return fmt.Errorf("chat template rendering a sample conversation: %w", err)
	}
	return nil
}
