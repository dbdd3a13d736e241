package engine

import (
	"errors"
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
				t.Errorf("built-in rendering:\n got %q\nwant %q", got, chatMLWant)
			}
			// A message with extra fields goes through Jinja: same text.
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
	o.Template = "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}ok"
	m = openModel(t, o, Options{Slots: 1})
	_, err := m.ApplyChatTemplate(chat, true)
	if !errors.Is(err, ErrTemplate) {
		t.Errorf("err = %v, want ErrTemplate", err)
	}
	if got, err := m.ApplyChatTemplate(chat[1:], true); err != nil || got != "ok" {
		t.Errorf("got %q, %v", got, err)
	}

	o.Template = "{% for m in messages %}"
	m = openModel(t, o, Options{Slots: 1})
	if _, err := m.ApplyChatTemplate(chat, true); !errors.Is(err, ErrTemplate) {
		t.Errorf("unterminated template: err = %v, want ErrTemplate", err)
	}
}
