package lark

import (
	"fmt"
	"sort"
)

// check makes sure the grammar can be translated: a start rule, every name
// defined, terminals built of terminals only, no left recursion.
func (g *Grammar) check() error {
	if _, ok := g.rules["start"]; !ok {
		return &SyntaxError{Reason: "the grammar has no start rule"}
	}
	for _, name := range g.order {
		body := g.body(name)
		for _, r := range refsOf(body) {
			if _, ok := g.line[r]; !ok {
				return &SyntaxError{Line: g.line[name], Reason: fmt.Sprintf("%s refers to %s, which is not defined", name, r)}
			}
			if isTerminal(name) && !isTerminal(r) {
				return &SyntaxError{Line: g.line[name], Reason: fmt.Sprintf("terminal %s refers to rule %s; a terminal is built of terminals only", name, r)}
			}
		}
	}
	return g.leftRecursion()
}

func (g *Grammar) body(name string) expr {
	if isTerminal(name) {
		return g.terms[name]
	}
	return g.rules[name]
}

// nullable reports which names can match the empty text.
func (g *Grammar) nullable() map[string]bool {
	null := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, n := range g.order {
			if !null[n] && g.exprNullable(g.body(n), null) {
				null[n], changed = true, true
			}
		}
	}
	return null
}

func (g *Grammar) exprNullable(e expr, null map[string]bool) bool {
	switch x := e.(type) {
	case alt:
		for _, y := range x {
			if g.exprNullable(y, null) {
				return true
			}
		}
		return false
	case seq:
		for _, y := range x {
			if !g.exprNullable(y, null) {
				return false
			}
		}
		return true
	case rep:
		return x.min == 0 || g.exprNullable(x.x, null)
	case ref:
		return null[x.name]
	case lit:
		return x.s == ""
	case regex:
		return regexNullable(x.tree)
	}
	return false
}

func regexNullable(e expr) bool {
	switch x := e.(type) {
	case alt:
		for _, y := range x {
			if regexNullable(y) {
				return true
			}
		}
		return false
	case seq:
		for _, y := range x {
			if !regexNullable(y) {
				return false
			}
		}
		return true
	case rep:
		return x.min == 0 || regexNullable(x.x)
	case lit:
		return x.s == ""
	}
	return false
}

// leftRecursion refuses a name that can reach itself before any text is
// consumed: llama.cpp's sampler cannot run such a grammar.
func (g *Grammar) leftRecursion() error {
	null := g.nullable()
	first := map[string][]string{}
	for _, n := range g.order {
		first[n] = g.firstRefs(g.body(n), null)
	}
	names := append([]string(nil), g.order...)
	sort.Strings(names)
	for _, n := range names {
		seen := map[string]bool{}
		stack := append([]string(nil), first[n]...)
		for len(stack) > 0 {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if m == n {
				return &UnsupportedError{Construct: "left recursion", Where: fmt.Sprintf("line %d: %s can refer to itself before it matches any text; write the repetition with * or +", g.line[n], n)}
			}
			if !seen[m] {
				seen[m] = true
				stack = append(stack, first[m]...)
			}
		}
	}
	return nil
}

// firstRefs are the names e can begin with.
func (g *Grammar) firstRefs(e expr, null map[string]bool) []string {
	switch x := e.(type) {
	case alt:
		var out []string
		for _, y := range x {
			out = append(out, g.firstRefs(y, null)...)
		}
		return out
	case seq:
		var out []string
		for _, y := range x {
			out = append(out, g.firstRefs(y, null)...)
			if !g.exprNullable(y, null) {
				break
			}
		}
		return out
	case rep:
		return g.firstRefs(x.x, null)
	case ref:
		return []string{x.name}
	}
	return nil
}
