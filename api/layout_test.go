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

// TestLayout reads the api tree: no file over maxFileLines lines, no
// function over maxFuncLines, every package with a doc comment, and no
// dialect package importing another dialect.
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
		if !slices.Contains(dialects, own) {
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, other := range dialects {
				if other != own && (p == module+"/"+other || strings.HasPrefix(p, module+"/"+other+"/")) {
					t.Errorf("%s: the %s dialect imports the %s dialect (%s)", path, own, other, p)
				}
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
