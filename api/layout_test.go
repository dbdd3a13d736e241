package api

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Bounds of the api tree's layout: a file over maxFileLines or a function
// over maxFuncLines is a sign to split by meaning.
const (
	maxFileLines = 500
	maxFuncLines = 120
)

// dialects are the dialect packages below api/, which may import the core
// but never one another.
var dialects = []string{"openai", "anthropic", "ollama", "responses"}

// mayImport are the api packages each package below api/ may import: a
// dialect, the task routes and the store routes only the core; the core
// only the access log; the access log none. The top package (the wiring)
// imports them all.
var mayImport = map[string][]string{
	"openai":    {"core"},
	"anthropic": {"core"},
	"ollama":    {"core"},
	"responses": {"core"},
	"tasks":     {"core"},
	"store":     {"core"},
	"core":      {"accesslog"},
	"accesslog": nil,
}

// TestLayout reads the api tree: no file over maxFileLines lines, no
// function over maxFuncLines, every package with a doc comment, and each
// package below api/ importing only the api packages mayImport gives it (so
// no dialect imports another).
func TestLayout(t *testing.T) {
	const module = "github.com/modeld/modeld/api"
	fset := token.NewFileSet()
	docs := map[string]bool{} // package dir -> some file has a doc comment
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		docs[dir] = docs[dir] || f.Doc != nil && !strings.HasSuffix(path, "_test.go")
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines, over %d", path, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s has %d lines, over %d", path, fn.Name.Name, n, maxFuncLines)
				}
			}
		}
		own := strings.Split(filepath.ToSlash(dir), "/")[0]
		if own == "." {
			return nil // the wiring
		}
		var imports []string
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			imports = append(imports, p)
		}
		for _, problem := range importProblems(own, imports) {
			t.Errorf("%s: %s", path, problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range docs {
		if !ok {
			t.Errorf("package %s has no doc comment", dir)
		}
	}
}

// importProblems are the imports of a file of package api/own that
// mayImport does not allow.
func importProblems(own string, imports []string) []string {
	const module = "github.com/modeld/modeld/api"
	allowed, known := mayImport[own]
	if !known {
		return []string{"package api/" + own + " is not in mayImport"}
	}
	var out []string
	for _, p := range imports {
		switch {
		case p == module:
			out = append(out, "api/"+own+" imports the wiring package api")
		case strings.HasPrefix(p, module+"/"):
			if other := strings.TrimPrefix(p, module+"/"); !slices.Contains(allowed, other) {
				out = append(out, fmt.Sprintf("api/%s imports api/%s; it may import only %v", own, other, allowed))
			}
		}
	}
	return out
}

// TestImportRuleRefuses: the rule TestLayout applies finds a dialect that
// imports another dialect, the wiring or an unknown api package, and lets
// the core and third-party imports through.
func TestImportRuleRefuses(t *testing.T) {
	const module = "github.com/modeld/modeld/api"
	for _, d := range dialects {
		for _, other := range dialects {
			if other != d && len(importProblems(d, []string{module + "/" + other})) != 1 {
				t.Errorf("api/%s importing api/%s is not refused", d, other)
			}
		}
		if len(importProblems(d, []string{module})) != 1 {
			t.Errorf("api/%s importing api is not refused", d)
		}
		if p := importProblems(d, []string{module + "/core", "github.com/gin-gonic/gin", "github.com/modeld/modeld/backends"}); len(p) != 0 {
			t.Errorf("api/%s: the core and outside imports are refused: %v", d, p)
		}
	}
	if len(importProblems("core", []string{module + "/openai"})) != 1 {
		t.Error("the core importing a dialect is not refused")
	}
	if len(importProblems("newdialect", nil)) != 1 {
		t.Error("a package missing from mayImport is not refused")
	}
}
