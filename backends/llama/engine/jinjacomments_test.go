package engine

import (
	"strings"
	"testing"
)

func TestStripJinjaComments(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"apostrophe", "a{# it's a \"quote #}b", "ab"},
		{"multiline", "a{# one\ntwo's #}\nb", "a\nb"},
		{"trim left", "a \n\t{#- x #} b", "a b"},
		{"trim right", "a {# x -#}\n  b", "a b"},
		{"trim both", "a \n{#- x' -#}\n b", "ab"},
		{"dash only", "a {#-#} b", "a b"},
		{"hash in expression string", `{{ "{# no" }}x{# yes #}`, `{{ "{# no" }}x`},
		{"hash in statement string", `{% set s = '{#' %}{{ s }}{# c #}`, `{% set s = '{#' %}{{ s }}`},
		{"closer in string", `{{ "}}{#" }}{#c#}`, `{{ "}}{#" }}`},
		{"escaped quote", `{{ 'a\'{#' }}{#c#}`, `{{ 'a\'{#' }}`},
		{"nested braces", `{{ {'a': {'b': '{#'}} }}{#c#}`, `{{ {'a': {'b': '{#'}} }}`},
		{"raw", "{% raw %}{# kept #}{% endraw %}{# gone #}", "{% raw %}{# kept #}{% endraw %}"},
		{"comment ends at first closer", "{# a '#} b #}", " b #}"},
		{"brace kept apart", "{{#- c #}", "{{#- c #}"},
		{"brace before comment", "{ {#- c #}% x", `{{ "{" }}% x`},
		{"no comment", "plain {{ x }}", "plain {{ x }}"},
	}
	for _, c := range cases {
		got, err := stripJinjaComments(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: stripJinjaComments(%q) = %q, want %q", c.name, c.src, got, c.want)
		}
	}
}

func TestStripJinjaCommentsUnclosed(t *testing.T) {
	_, err := stripJinjaComments("a\nb{# it's open")
	if err == nil || !strings.Contains(err.Error(), "unclosed comment at line 2") {
		t.Fatalf("err = %v, want unclosed comment at line 2", err)
	}
}

// TestCompileTemplateComments renders a template whose comments hold quotes
// and whose strings hold comment openers.
func TestCompileTemplateComments(t *testing.T) {
	src := "{#- Llama's comment -#}\n{% for m in messages %}{{ m.content + '{#' }}{# it's #}{% endfor %}"
	tmpl, err := compileTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(map[string]any{"messages": []any{map[string]any{"content": "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if out != "hi{#" {
		t.Errorf("rendered %q, want %q", out, "hi{#")
	}
}
