package lark

import (
	"fmt"
	"sync"
)

// commonText is the built-in "common" module: Lark's common terminals,
// written in the subset this package reads (the lazy and lookbehind forms
// of ESCAPED_STRING and C_COMMENT as plain equivalents).
const commonText = `
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
ESCAPED_STRING: "\"" (/[^"\\\n]/ | /\\[^\n]/)* "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
`

var common struct {
	once sync.Once
	g    *Grammar
	err  error
}

func commonModule() (*Grammar, error) {
	common.once.Do(func() { common.g, common.err = parse(commonText) })
	return common.g, common.err
}

// importCommon defines alias as common's name, and the common terminals it
// refers to under "common__" names (as Lark namespaces them).
func (g *Grammar) importCommon(name, alias string, line int) error {
	m, err := commonModule()
	if err != nil {
		return fmt.Errorf("lark: the built-in common module: %w", err)
	}
	body, ok := m.terms[name]
	if !ok {
		if _, isRule := m.rules[name]; !isRule {
			return &SyntaxError{Line: line, Reason: fmt.Sprintf("common has no terminal %s", name)}
		}
	}
	if isTerminal(name) != isTerminal(alias) {
		return &SyntaxError{Line: line, Reason: fmt.Sprintf("%s cannot be imported as %s: a terminal keeps an uppercase name", name, alias)}
	}
	if err := g.define(alias, renameRefs(body, "common__"), line); err != nil {
		return err
	}
	for _, dep := range refsOf(body) {
		if err := g.importDep(m, dep, line); err != nil {
			return err
		}
	}
	return nil
}

func (g *Grammar) importDep(m *Grammar, name string, line int) error {
	alias := "common__" + name
	if _, done := g.line[alias]; done {
		return nil
	}
	body := m.terms[name]
	if err := g.define(alias, renameRefs(body, "common__"), line); err != nil {
		return err
	}
	for _, dep := range refsOf(body) {
		if err := g.importDep(m, dep, line); err != nil {
			return err
		}
	}
	return nil
}

func (g *Grammar) define(name string, body expr, line int) error {
	if first, dup := g.line[name]; dup {
		return &SyntaxError{Line: line, Reason: fmt.Sprintf("%s is defined twice (first on line %d)", name, first)}
	}
	g.line[name] = line
	g.order = append(g.order, name)
	if isTerminal(name) {
		g.terms[name] = body
	} else {
		g.rules[name] = body
	}
	return nil
}

// refsOf lists the names e refers to, each once.
func refsOf(e expr) []string {
	seen := map[string]bool{}
	var out []string
	walk(e, func(x expr) {
		if r, ok := x.(ref); ok && !seen[r.name] {
			seen[r.name] = true
			out = append(out, r.name)
		}
	})
	return out
}

// walk calls f on e and every expression inside it.
func walk(e expr, f func(expr)) {
	f(e)
	switch x := e.(type) {
	case alt:
		for _, y := range x {
			walk(y, f)
		}
	case seq:
		for _, y := range x {
			walk(y, f)
		}
	case rep:
		walk(x.x, f)
	}
}

// renameRefs is e with every reference's name prefixed.
func renameRefs(e expr, prefix string) expr {
	switch x := e.(type) {
	case alt:
		out := make(alt, len(x))
		for i, y := range x {
			out[i] = renameRefs(y, prefix)
		}
		return out
	case seq:
		out := make(seq, len(x))
		for i, y := range x {
			out[i] = renameRefs(y, prefix)
		}
		return out
	case rep:
		return rep{renameRefs(x.x, prefix), x.min, x.max}
	case ref:
		return ref{prefix + x.name}
	}
	return e
}
