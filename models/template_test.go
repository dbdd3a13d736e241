package models

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// A model whose chat template would exhaust the renderer (a hostile model
// file's template) is refused at import, with the budget named, before any
// runner renders it; a template that merely refuses a conversation shape
// (raise_exception) imports.
func TestImportRefusesTemplateOverBudget(t *testing.T) {
	s := newTestStore(t)
	dir := t.TempDir()
	for name, tmpl := range map[string]string{
		"billion iterations": "{% for i in range(1000000000) %}x{% endfor %}",
		"recursive macro":    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"doubling string":    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
	} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".gguf")
			if err := ggufgen.WriteFile(src, ggufgen.Options{Vocab: ggufgen.SPM, Template: tmpl}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Import(context.Background(), src, ImportOptions{Name: "evil/template"}, nil)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "budget") || !strings.Contains(err.Error(), filepath.Base(src)) {
				t.Fatalf("import = %v, want ErrInvalidModel naming the file and the budget", err)
			}
		})
	}
	if ms, err := s.List(); err != nil || len(ms) != 0 {
		t.Errorf("List = %v, %v after refused imports", ms, err)
	}
	src := filepath.Join(dir, "refuses-system.gguf")
	if err := ggufgen.WriteFile(src, ggufgen.Options{Vocab: ggufgen.SPM, Template: "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(context.Background(), src, ImportOptions{Name: "picky"}, nil); err != nil {
		t.Fatalf("a template that refuses a system message: %v", err)
	}
}
