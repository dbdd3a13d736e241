package api

import (
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
		allowed, known := mayImport[own]
		if !known {
			t.Errorf("%s: package api/%s is not in mayImport", path, own)
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != module && !strings.HasPrefix(p, module+"/") {
				continue
			}
			if p == module {
				t.Errorf("%s: api/%s imports the wiring package api", path, own)
				continue
			}
			if other := strings.TrimPrefix(p, module+"/"); !slices.Contains(allowed, other) {
				t.Errorf("%s: api/%s imports api/%s; it may import only %v", path, own, other, allowed)
			}
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
