package chattmpl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	. "github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/jinja"
)

// TestKwargsAndReserved: chat_template_kwargs reach the template (an
// integer stays one), but cannot replace the request's own variables.
func TestKwargsAndReserved(t *testing.T) {
	tmpl, err := Compile("{{ budget }}|{{ opts | tojson }}|{{ messages | length }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ tools }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(Input{
		Messages: []backends.Message{{Role: "user", Content: "hi"}},
		BOS:      "<s>",
		Kwargs: map[string]any{"budget": float64(100), "opts": map[string]any{"b": 1.5, "a": true},
			"messages": []any{}, "add_generation_prompt": true, "bos_token": "EVIL", "tools": "EVIL"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `100|{"a": true, "b": 1.5}|1|False|<s>|None`; out != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// TestCheck: import's check refuses a template that does not parse or
// blows the budget on the sample, and passes one that only refuses a
// conversation shape.
func TestCheck(t *testing.T) {
	if err := Check("{% for i in range(1000000000) %}x{% endfor %}", jinja.Budget{}); !errors.Is(err, jinja.ErrBudget) {
		t.Errorf("loop: %v", err)
	}
	if err := Check("{% for m in messages %}", jinja.Budget{}); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("unclosed for: %v", err)
	}
	if err := Check("{{ raise_exception('no') }}", jinja.Budget{}); err != nil {
		t.Errorf("raise: %v", err)
	}
	if err := Check("{% for m in messages %}{{ m.content }}{% endfor %}", jinja.Budget{}); err != nil {
		t.Errorf("plain: %v", err)
	}
}
