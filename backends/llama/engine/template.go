package engine

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"
	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// ErrTemplate: the model's chat template failed to compile or render (for
// example it raised an exception on the messages given).
var ErrTemplate = backends.ErrTemplate

// Message is one chat message for ApplyChatTemplate. A message with a name,
// tool calls or a tool call id is always rendered by Jinja, which sees them
// as OpenAI's fields (name, tool_calls, tool_call_id).
type Message = backends.Message

// jinjaArguments is a tool call's arguments as templates read them: the
// object, when they are a JSON object (templates render it with tojson, as
// for the tools' parameters), else the text.
func jinjaArguments(args string) any {
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return obj
	}
	return args
}

// jinjaFields are a message's fields beyond role and content, as a Jinja
// template reads them; nil when it has none.
func jinjaFields(m Message) map[string]any {
	if m.Name == "" && m.ToolCallID == "" && len(m.ToolCalls) == 0 {
		return nil
	}
	f := map[string]any{}
	if m.Name != "" {
		f["name"] = m.Name
	}
	if m.ToolCallID != "" {
		f["tool_call_id"] = m.ToolCallID
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": jinjaArguments(c.Arguments)}}
		}
		f["tool_calls"] = calls
	}
	return f
}

// templateState holds the model's Jinja template, compiled on first use.
type templateState struct {
	once sync.Once
	tmpl *jinja.Template
	err  error

	specialsOnce sync.Once
	specials     *specials // the vocabulary's control tokens (ChatPrompt)
}

// ApplyChatTemplate renders messages with the model's tokenizer.chat_template
// into a prompt text. Generation takes ChatPrompt's ids instead: tokenizing
// this text with special parsing would turn control-token text inside the
// messages into control tokens (forged turns). llama.cpp's
// built-in template matcher renders it when it recognises the template; a
// Jinja renderer does otherwise. With addAssistant the prompt ends with the
// opening of an assistant turn. A model without a template gives
// ErrNoChatTemplate.
func (m *Model) ApplyChatTemplate(msgs []Message, addAssistant bool) (string, error) {
	src := m.info.ChatTemplate
	if src == "" {
		return "", ErrNoChatTemplate
	}
	if len(msgs) == 0 {
		return "", fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	if builtinOK(msgs) {
		if out, ok := applyBuiltin(src, msgs, addAssistant); ok {
			return out, nil
		}
	}
	return m.applyJinja(msgs, addAssistant)
}

// builtinOK reports whether llama.cpp's matcher can take the messages: it
// knows only role and content, as C strings.
func builtinOK(msgs []Message) bool {
	for _, msg := range msgs {
		if jinjaFields(msg) != nil || strings.IndexByte(msg.Role, 0) >= 0 || strings.IndexByte(msg.Content, 0) >= 0 {
			return false
		}
	}
	return true
}

// applyBuiltin renders with llama_chat_apply_template; ok is false when
// llama.cpp does not recognise the template.
func applyBuiltin(src string, msgs []Message, addAssistant bool) (string, bool) {
	if strings.IndexByte(src, 0) >= 0 {
		return "", false
	}
	chat := make([]yz.ChatMessage, len(msgs))
	size := 1024
	for i, msg := range msgs {
		chat[i] = yz.NewChatMessage(msg.Role, msg.Content)
		size += 2 * (len(msg.Role) + len(msg.Content))
	}
	buf := make([]byte, size)
	n := yz.ChatApplyTemplate(src, chat, addAssistant, buf)
	if n > int32(len(buf)) {
		buf = make([]byte, n)
		n = yz.ChatApplyTemplate(src, chat, addAssistant, buf)
	}
	runtime.KeepAlive(chat)
	if n < 0 || n > int32(len(buf)) {
		return "", false
	}
	return string(buf[:n]), true
}

func (m *Model) applyJinja(msgs []Message, addAssistant bool) (string, error) {
	return m.applyJinjaTools(msgs, nil, addAssistant, nil)
}

// applyJinjaTools renders with the Jinja renderer; tools, when there are
// any, are the template's tools variable. extra are more variables (the
// request's chat_template_kwargs); they cannot replace messages, tools,
// add_generation_prompt or the special tokens. enable_thinking is true
// unless extra says otherwise, as reasoning templates expect of their
// renderer.
func (m *Model) applyJinjaTools(msgs []Message, tools []Tool, addAssistant bool, extra map[string]any) (string, error) {
	m.tmpl.once.Do(func() {
		m.tmpl.tmpl, m.tmpl.err = compileTemplate(m.info.ChatTemplate)
	})
	if m.tmpl.err != nil {
		return "", fmt.Errorf("%w: compile: %w", ErrTemplate, m.tmpl.err)
	}
	bos, eos, err := m.specialTexts()
	if err != nil {
		return "", err
	}
	list := make([]any, len(msgs))
	for i, msg := range msgs {
		fields := jinjaFields(msg)
		d := make(map[string]any, len(fields)+2)
		for k, v := range fields {
			d[k] = v
		}
		d["role"] = msg.Role
		d["content"] = msg.Content
		list[i] = d
	}
	vars := map[string]any{"enable_thinking": true}
	for k, v := range extra {
		vars[k] = v
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = addAssistant
	vars["bos_token"] = bos
	vars["eos_token"] = eos
	delete(vars, "tools")
	if len(tools) > 0 {
		if vars["tools"], err = jinjaTools(tools); err != nil {
			return "", err
		}
	}
	out, err := m.tmpl.tmpl.Render(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	// Templates often start with {{ bos_token }}; Tokenize adds BOS itself
	// when the vocabulary asks for it, so drop the rendered one.
	if m.info.AddBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	return out, nil
}

// specialTexts are the texts of the BOS and EOS tokens ("" when absent).
func (m *Model) specialTexts() (string, string, error) {
	text := func(id int32) (string, error) {
		if id < 0 || int(id) >= m.nVocab {
			return "", nil
		}
		return m.TokenPiece(id, true)
	}
	bos, err := text(m.info.BOS)
	if err != nil {
		return "", "", err
	}
	eos, err := text(m.info.EOS)
	return bos, eos, err
}
