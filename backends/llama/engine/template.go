package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/jinja"
)

// ErrTemplate: the model's chat template failed to compile or render (for
// example it raised an exception on the messages given, or ran past its
// render budget).
var ErrTemplate = backends.ErrTemplate

// Message is one chat message for ApplyChatTemplate.
type Message = backends.Message

// templateState holds the model's chat template, compiled on first use.
type templateState struct {
	once sync.Once
	tmpl *chattmpl.Template
	err  error            // the template does not compile: llama.cpp's matcher renders
	now  func() time.Time // strftime_now's clock; nil is time.Now (tests set it)

	specialsOnce sync.Once
	specials     *specials // the vocabulary's control tokens (ChatPrompt)
}

// ApplyChatTemplate renders messages with the model's tokenizer.chat_template
// into a prompt text, as Hugging Face's apply_chat_template renders it
// (internal/chattmpl). Generation takes ChatPrompt's ids instead:
// tokenizing this text with special parsing would turn control-token text
// inside the messages into control tokens (forged turns). With addAssistant
// the prompt ends with the opening of an assistant turn. A model without a
// template gives ErrNoChatTemplate.
func (m *Model) ApplyChatTemplate(msgs []Message, addAssistant bool) (string, error) {
	if m.info.ChatTemplate == "" {
		return "", ErrNoChatTemplate
	}
	if len(msgs) == 0 {
		return "", fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	return m.render(msgs, nil, addAssistant, nil)
}

// render renders the chat with the template's own Jinja; tools, when there
// are any, are the template's tools variable, and vars the request's
// chat_template_kwargs. Only a template that modeld's Jinja cannot compile
// falls back to llama.cpp's built-in matcher (logged once per model), and
// then only for chats it can express (roles and contents, no tools).
func (m *Model) render(msgs []Message, tools []Tool, addAssistant bool, vars map[string]any) (string, error) {
	m.tmpl.once.Do(func() {
		m.tmpl.tmpl, m.tmpl.err = chattmpl.Compile(m.info.ChatTemplate)
		if m.tmpl.err != nil {
			slog.Warn("chat template does not compile; llama.cpp's built-in template matcher renders plain chats",
				"model", m.info.Path, "err", m.tmpl.err)
		}
	})
	if m.tmpl.err != nil {
		if len(tools) == 0 && len(vars) == 0 && builtinOK(msgs) {
			if out, ok := applyBuiltin(m.info.ChatTemplate, msgs, addAssistant); ok {
				return out, nil
			}
		}
		return "", fmt.Errorf("%w: compile: %w", ErrTemplate, m.tmpl.err)
	}
	bos, eos, err := m.specialTexts()
	if err != nil {
		return "", err
	}
	out, _, err := m.tmpl.tmpl.RenderPolyfilled(chattmpl.Input{
		Messages: msgs, Tools: tools, AddGenerationPrompt: addAssistant,
		BOS: bos, EOS: eos, Kwargs: vars, Now: m.tmpl.now,
	})
	if err != nil {
		if errors.Is(err, jinja.ErrBudget) {
			return "", fmt.Errorf("%w: the model's chat template ran past its render budget: %w", ErrTemplate, err)
		}
		if errors.Is(err, jinja.ErrRaised) {
			return "", fmt.Errorf("%w: the model's chat template refuses this conversation: %w", ErrTemplate, err)
		}
		var bad *chattmpl.InputError
		if errors.As(err, &bad) {
			return "", fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	// Templates often start with {{ bos_token }}; Tokenize adds BOS itself
	// when the vocabulary asks for it, so drop the rendered one.
	if m.info.AddBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	return out, nil
}

// builtinOK reports whether llama.cpp's matcher can take the messages: it
// knows only role and content, as C strings.
func builtinOK(msgs []Message) bool {
	for _, msg := range msgs {
		if msg.Name != "" || msg.ToolCallID != "" || len(msg.ToolCalls) > 0 || msg.Reasoning != "" ||
			strings.IndexByte(msg.Role, 0) >= 0 || strings.IndexByte(msg.Content, 0) >= 0 {
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
