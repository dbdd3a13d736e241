package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

var chat = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Grüße 🙂"},
}

const chatMLWant = "<|im_start|>system\nBe brief.<|im_end|>\n" +
	"<|im_start|>user\nGrüße 🙂<|im_end|>\n<|im_start|>assistant\n"

func TestChatMLTemplate(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 1})
			if !m.Info().HasChatTemplate() {
				t.Fatal("Info says no chat template")
			}
			got, err := m.ApplyChatTemplate(chat, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != chatMLWant {
				t.Errorf("rendering:\n got %q\nwant %q", got, chatMLWant)
			}
			// A message with extra fields: same text.
			withFields := append([]Message(nil), chat...)
			withFields[0].Name = "rules"
			got, err = m.ApplyChatTemplate(withFields, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != chatMLWant {
				t.Errorf("Jinja rendering:\n got %q\nwant %q", got, chatMLWant)
			}
			noAsst, err := m.ApplyChatTemplate(chat, false)
			if err != nil {
				t.Fatal(err)
			}
			if noAsst+"<|im_start|>assistant\n" != chatMLWant {
				t.Errorf("without assistant prompt: %q", noAsst)
			}
		})
	}
}

func TestJinjaTemplate(t *testing.T) {
	o := ggufgen.Tiny(ggufgen.SPM)
	o.Template = "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}" +
		"{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
	m := openModel(t, o, Options{Slots: 1})
	got, err := m.ApplyChatTemplate(chat, true)
	if err != nil {
		t.Fatal(err)
	}
	// The SPM vocabulary adds BOS when tokenizing, so the rendered
	// bos_token is dropped.
	want := "[SYSTEM] Be brief.\n[USER] Grüße 🙂\n[ASSISTANT]"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTemplateErrors(t *testing.T) {
	o := ggufgen.Tiny(ggufgen.BPE)
	o.NoTemplate = true
	m := openModel(t, o, Options{Slots: 1})
	if m.Info().HasChatTemplate() {
		t.Error("Info says the model has a template")
	}
	if _, err := m.ApplyChatTemplate(chat, true); !errors.Is(err, ErrNoChatTemplate) {
		t.Errorf("err = %v, want ErrNoChatTemplate", err)
	}

	o = ggufgen.Tiny(ggufgen.BPE)
	o.Template = "{% if messages[-1].role != 'user' %}{{ raise_exception('the last message must be from the user') }}{% endif %}ok"
	m = openModel(t, o, Options{Slots: 1})
	_, err := m.ApplyChatTemplate(append(chat[1:], Message{Role: "assistant", Content: "hi"}), true)
	if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "the last message must be from the user") {
		t.Errorf("err = %v, want ErrTemplate with the template's message", err)
	}
	if got, err := m.ApplyChatTemplate(chat[1:], true); err != nil || got != "ok" {
		t.Errorf("got %q, %v", got, err)
	}

	// A template without a system role gets the system text merged into
	// the first user turn (the documented polyfill).
	o.Template = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
	m = openModel(t, o, Options{Slots: 1})
	if got, err := m.ApplyChatTemplate(chat, true); err != nil || got != "[user] Be brief.\n\nGrüße 🙂\n" {
		t.Errorf("polyfill: got %q, %v", got, err)
	}

	o.Template = "{% for m in messages %}"
	m = openModel(t, o, Options{Slots: 1})
	if _, err := m.ApplyChatTemplate(chat, true); !errors.Is(err, ErrTemplate) {
		t.Errorf("unterminated template: err = %v, want ErrTemplate", err)
	}
}

// TestTemplateBudget: a hostile model file's template that would loop a
// billion times or recurse without end fails fast with ErrTemplate naming
// the render budget, through both ApplyChatTemplate and ChatPrompt.
func TestTemplateBudget(t *testing.T) {
	for name, src := range map[string]string{
		"loop":            "{% for i in range(1000000000) %}x{% endfor %}",
		"recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
	} {
		t.Run(name, func(t *testing.T) {
			o := ggufgen.Tiny(ggufgen.BPE)
			o.Template = src
			m := openModel(t, o, Options{Slots: 1})
			_, err := m.ApplyChatTemplate(chat, true)
			if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "render budget") {
				t.Errorf("ApplyChatTemplate: err = %v, want ErrTemplate naming the render budget", err)
			}
			_, err = m.ChatPrompt(chat, nil, true)
			if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "render budget") {
				t.Errorf("ChatPrompt: err = %v, want ErrTemplate naming the render budget", err)
			}
		})
	}
}
