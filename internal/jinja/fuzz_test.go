package jinja

import (
	"errors"
	"testing"
)

// FuzzTemplate: any source compiles or is refused, and any compiled
// template renders or fails within a small budget, without a panic.
func FuzzTemplate(f *testing.F) {
	for _, c := range refCases {
		f.Add(c.src)
	}
	for _, h := range hostileTemplates {
		f.Add(h.src)
	}
	vars, err := FromJSON([]byte(refVars))
	if err != nil {
		f.Fatal(err)
	}
	top := map[string]any{}
	for _, k := range vars.(*Map).Keys() {
		top[k], _ = vars.(*Map).Get(k)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src)
		if err != nil {
			return
		}
		out, err := tmpl.Render(top, Options{Budget: Budget{Steps: 100_000, Output: 1 << 20}})
		if err == nil && len(out) > 1<<20 {
			t.Fatalf("output of %d bytes past the budget", len(out))
		}
		if errors.Is(err, ErrBudget) && out != "" {
			t.Fatal("output with a budget error")
		}
	})
}
