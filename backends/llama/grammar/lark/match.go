package lark

import (
	"regexp"
	"strconv"
	"strings"
)

// Match reports whether text parses under g's start rule, read the way
// Lark's Earley parser with its dynamic lexer reads it: rules explore every
// alternative, and each terminal (a named one, a string, a /regex/)
// matches once at a position, as far as Python's re.match takes it.
// Regular expressions are matched by Go's regexp from their source text,
// with Python's Unicode classes, independently of the GBNF translation
// (only the parsed rules are shared): it is the check that sampled text
// parses. Its cost grows with the text's length times the grammar's
// ambiguity; use it on tool inputs, not on documents.
func (g *Grammar) Match(text string) bool {
	return newRecognizer(g).accepts(text)
}

// recognizer is Match's state.
type recognizer struct {
	g     *Grammar
	text  string
	memo  map[recKey][]int
	terms map[string]*regexp.Regexp
}

type recKey struct {
	name string
	pos  int
}

func newRecognizer(g *Grammar) *recognizer {
	return &recognizer{g: g, terms: map[string]*regexp.Regexp{}}
}

// accepts reports whether the start rule matches all of text.
func (r *recognizer) accepts(text string) bool {
	r.text, r.memo = text, map[recKey][]int{}
	for _, end := range r.rule("start", 0) {
		if end == len(text) {
			return true
		}
	}
	return false
}

func (r *recognizer) rule(name string, pos int) []int {
	k := recKey{name, pos}
	if ends, ok := r.memo[k]; ok {
		return ends
	}
	r.memo[k] = nil // no left recursion (refused): a cycle here consumes text
	ends := r.ends(r.g.rules[name], pos)
	r.memo[k] = ends
	return ends
}

// ends are the positions where e, begun at pos, can end.
func (r *recognizer) ends(e expr, pos int) []int {
	switch x := e.(type) {
	case alt:
		var out []int
		for _, y := range x {
			out = union(out, r.ends(y, pos))
		}
		return out
	case seq:
		cur := []int{pos}
		for _, y := range x {
			var next []int
			for _, p := range cur {
				next = union(next, r.ends(y, p))
			}
			cur = next
		}
		return cur
	case rep:
		var out []int
		if x.min == 0 {
			out = []int{pos}
		}
		cur := []int{pos}
		for n := 1; (x.max < 0 || n <= x.max) && len(cur) > 0; n++ {
			var next []int
			for _, p := range cur {
				for _, q := range r.ends(x.x, p) {
					if q > p || n <= x.min { // a repetition that consumes nothing adds nothing
						next = union(next, []int{q})
					}
				}
			}
			cur = next
			if n >= x.min {
				out = union(out, cur)
			}
			if len(cur) > 0 && n > len(r.text)+x.min {
				break
			}
		}
		return out
	case ref:
		if isTerminal(x.name) {
			return r.terminal(x.name, "(?:"+goRegex(r.g, r.g.terms[x.name])+")", pos)
		}
		return r.rule(x.name, pos)
	default: // an anonymous terminal
		return r.terminal("", "(?:"+goRegex(r.g, e)+")", pos)
	}
}

func (r *recognizer) terminal(name, src string, pos int) []int {
	re, ok := r.terms[src]
	if !ok {
		var err error
		if re, err = regexp.Compile(`\A` + src); err != nil {
			return nil // a pattern Go cannot read matches nothing
		}
		r.terms[src] = re
	}
	loc := re.FindStringIndex(r.text[pos:])
	if loc == nil {
		return nil
	}
	return []int{pos + loc[1]}
}

func union(a, b []int) []int {
	for _, x := range b {
		found := false
		for _, y := range a {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			a = append(a, x)
		}
	}
	return a
}

// pythonClasses are Python's str-pattern classes in Go's syntax.
var pythonClasses = strings.NewReplacer(
	`\s`, `[\t-\r\x1c- \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`,
	`\S`, `[^\t-\r\x1c- \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`,
	`\d`, `\p{Nd}`, `\D`, `\P{Nd}`,
	`\w`, `[\p{L}\p{N}_]`, `\W`, `[^\p{L}\p{N}_]`,
)

// goRegex is a terminal's expansion as one Go regular expression.
func goRegex(g *Grammar, e expr) string {
	switch x := e.(type) {
	case alt:
		parts := make([]string, len(x))
		for i, y := range x {
			parts[i] = goRegex(g, y)
		}
		return "(?:" + strings.Join(parts, "|") + ")"
	case seq:
		var b strings.Builder
		for _, y := range x {
			b.WriteString("(?:" + goRegex(g, y) + ")")
		}
		return b.String()
	case rep:
		s := "(?:" + goRegex(g, x.x) + ")"
		switch {
		case x.max < 0:
			return s + "{" + itoa(x.min) + ",}"
		}
		return s + "{" + itoa(x.min) + "," + itoa(x.max) + "}"
	case ref:
		return "(?:" + goRegex(g, g.terms[x.name]) + ")"
	case lit:
		if x.fold {
			return "(?i:" + regexp.QuoteMeta(x.s) + ")"
		}
		return regexp.QuoteMeta(x.s)
	case chars:
		var b strings.Builder
		b.WriteString("[")
		for _, r := range x.set {
			b.WriteString(`\x{` + hex(r.lo) + `}-\x{` + hex(r.hi) + `}`)
		}
		return b.String() + "]"
	case regex:
		flags := strings.NewReplacer("u", "", "l", "").Replace(x.flags)
		src := pythonClasses.Replace(x.src)
		if flags != "" {
			return "(?" + flags + ":" + src + ")"
		}
		return "(?:" + src + ")"
	}
	return "[^\\x{0}-\\x{10ffff}]" // matches nothing
}

func itoa(n int) string { return strconv.Itoa(n) }

func hex(r rune) string { return strconv.FormatInt(int64(r), 16) }
