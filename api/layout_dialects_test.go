package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fileDialect is the dialect a file of package api belongs to by its name
// (openai.go, anthropic_stream.go, ...), or "" for the core.
func fileDialect(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".go")
	own, _, _ := strings.Cut(base, "_")
	for _, d := range dialects {
		if own == d {
			return d
		}
	}
	return ""
}

// TestDialectFilesIndependent: while the dialects' files still live in
// package api, none uses a declaration of another dialect's files (what
// two dialects share lives in the core: fields.go, tooldefs.go,
// chatcore.go, ...), and the core uses the dialects' only in the files
// coreWiring lists. It is the rule TestLayout checks of the dialect
// packages, one step before them.
func TestDialectFilesIndependent(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // top-level name -> the dialect whose file declares it
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		d := fileDialect(path)
		if d == "" {
			continue
		}
		for name := range topLevel(f) {
			declared[name] = d
		}
	}
	checked := 0
	core := map[string][]string{} // core file -> the dialect declarations it uses
	for _, f := range files {
		path := fset.File(f.Pos()).Name()
		own := fileDialect(path)
		for _, u := range foreignUses(f, own, declared) {
			if own == "" {
				core[path] = append(core[path], u.name)
				continue
			}
			t.Errorf("%s: the %s dialect uses %s of the %s dialect", fset.Position(u.pos), own, u.name, u.dialect)
		}
		if own != "" {
			checked++
		}
	}
	if checked < len(dialects) {
		t.Fatalf("only %d dialect files found", checked)
	}
	for path, names := range core {
		if !coreWiring[path] {
			slices.Sort(names)
			t.Errorf("%s: the core uses the dialects' %s", path, strings.Join(slices.Compact(names), ", "))
		}
	}
	for path := range coreWiring {
		if core[path] == nil {
			t.Errorf("coreWiring lists %s, which uses no dialect's declarations", path)
		}
	}
}

// coreWiring are the core files that still use dialects' declarations:
// where the server registers their routes, and what of the OpenAI dialect
// the core still reads. A split into packages inverts each of them; an
// entry that uses none is stale.
var coreWiring = map[string]bool{
	"server.go":   true, // the routes; Options.Responses is the Responses store's
	"tokenize.go": true, // /v1/tokenize reads a chat completions request
}

// use is a name of another dialect's file that a file uses.
type use struct {
	name, dialect string
	pos           token.Pos
}

// foreignUses are the names f (of dialect own; "" is the core) uses that
// another dialect's files declare.
func foreignUses(f *ast.File, own string, declared map[string]string) []use {
	var out []use
	var walk func(ast.Node) bool
	walk = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // x.Name: Name is x's, not the package's
			ast.Inspect(n.X, walk)
			return false
		case *ast.KeyValueExpr: // a composite literal's key names a field
			if _, ok := n.Key.(*ast.Ident); ok {
				ast.Inspect(n.Value, walk)
				return false
			}
		case *ast.FuncDecl: // a method's name is its type's
			if n.Recv != nil {
				ast.Inspect(n.Recv, walk)
				ast.Inspect(n.Type, walk)
				if n.Body != nil {
					ast.Inspect(n.Body, walk)
				}
				return false
			}
		case *ast.Ident:
			// Obj is nil for a name declared in another file of the package.
			if d := declared[n.Name]; n.Obj == nil && d != "" && d != own {
				out = append(out, use{n.Name, d, n.Pos()})
			}
		}
		return true
	}
	ast.Inspect(f, walk)
	return out
}

// topLevel are the names f declares at package level (methods excluded).
func topLevel(f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							out[n.Name] = true
						}
					}
				}
			}
		}
	}
	return out
}
