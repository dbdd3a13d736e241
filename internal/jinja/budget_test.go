package jinja

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// hostileTemplates are what a hostile model file's chat template may hold
// to exhaust the process that renders it.
var hostileTemplates = []struct{ name, src, budget string }{
	{"billion iterations", "{% for i in range(1000000000) %}x{% endfor %}", "steps"},
	{"nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps"},
	{"recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper"},
	{"mutually recursive macros", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "nested deeper"},
	{"recursive loop", "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "recursion deeper"},
	{"string repeat", "{{ 'x' * 1000000000 }}", "output"},
	{"list repeat", "{{ ([1] * 1000000000) | length }}", "steps"},
	{"doubling string", "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}", "output"},
	{"doubling by plus", "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "output"},
	{"range to list", "{{ range(1000000000) | list | length }}", "steps"},
	{"join of a huge range", "{{ range(1000000000) | join(',') }}", "steps"},
	{"replace blowup", "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}", "output"},
	{"indent blowup", "{% set ns = namespace(s='a\\n' * 1000) %}{% for i in range(40) %}{% set ns.s = ns.s | indent(1000) %}{% endfor %}{{ ns.s }}", "steps"},
	{"output flood", "{% for i in range(100000) %}{{ 'y' * 100000 }}{% endfor %}", "output"},
}

// TestHostileTemplatesFailFast: each hostile template fails with ErrBudget
// naming the budget it ran past, and the rendering's allocations stay far
// below what would hurt (the defaults bound output at 32 MiB).
func TestHostileTemplatesFailFast(t *testing.T) {
	for _, h := range hostileTemplates {
		t.Run(h.name, func(t *testing.T) {
			tmpl, err := Compile(h.src)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = tmpl.Render(nil, Options{})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("err = %v, want ErrBudget", err)
			}
			if !strings.Contains(err.Error(), h.budget) {
				t.Errorf("err = %v, want it to name the %s budget", err, h.budget)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
				t.Errorf("allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestBudgetDefaultsRenderRealWork: a legitimate template over a long
// conversation renders within the default budget.
func TestBudgetDefaultsRenderRealWork(t *testing.T) {
	tmpl, err := Compile("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if not loop.last %}\n{% endif %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []any
	for range 20000 {
		m := NewMap()
		m.Set("role", "user")
		m.Set("content", strings.Repeat("word ", 200))
		msgs = append(msgs, m)
	}
	out, err := tmpl.Render(map[string]any{"messages": msgs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20000*1000 {
		t.Errorf("rendered %d bytes", len(out))
	}
}

// TestHostileParse: deeply nested source is refused when parsed, not by
// exhausting the stack.
func TestHostileParse(t *testing.T) {
	for name, src := range map[string]string{
		"parentheses": "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}",
		"lists":       "{{ " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + " }}",
		"not":         "{{ " + strings.Repeat("not ", 100000) + "x }}",
		"minus":       "{{ " + strings.Repeat("-", 100000) + "1 }}",
		"ifs":         strings.Repeat("{% if true %}", 100000) + strings.Repeat("{% endif %}", 100000),
	} {
		if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Errorf("%s: err = %v, want a nesting error", name, err)
		}
	}
}

// TestBudgetSmall: a caller's budget bounds what it says.
func TestBudgetSmall(t *testing.T) {
	tmpl, err := Compile("{% for i in range(100) %}{{ i }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, Options{Budget: Budget{Steps: 50}}); !errors.Is(err, ErrBudget) {
		t.Errorf("steps 50: %v", err)
	}
	if _, err := tmpl.Render(nil, Options{Budget: Budget{Output: 10}}); !errors.Is(err, ErrBudget) {
		t.Errorf("output 10: %v", err)
	}
	if out, err := tmpl.Render(nil, Options{}); err != nil || len(out) != 190 {
		t.Errorf("default: %q, %v", out, err)
	}
}
