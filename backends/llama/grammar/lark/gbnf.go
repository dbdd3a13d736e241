package lark

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/modeld/modeld/backends/llama/grammar"
)

// Options shape the GBNF.
type Options struct {
	// Root is the name of the rule for the whole text (default "root").
	Root string
	// Prefix begins every other rule's name (default "lark-"), so that the
	// rules can sit inside a larger grammar.
	Prefix string
	// JSONString writes each sentence as the body of a JSON string: the
	// characters JSON must escape as their escapes.
	JSONString bool
}

// MaxGBNF bounds the size of the GBNF text.
const MaxGBNF = 1 << 20

// maxCount bounds a repetition's count (llama.cpp expands counted
// repetitions into rules).
const maxCount = 1000

// GBNF writes g as GBNF rules, one a line, the first the root rule: a
// sentence of the root is a text g's start rule accepts (see the package
// doc for the two narrowings).
func (g *Grammar) GBNF(opts Options) (string, error) {
	if opts.Root == "" {
		opts.Root = "root"
	}
	if opts.Prefix == "" {
		opts.Prefix = "lark-"
	}
	w := &writer{g: g, opts: opts, sets: map[string]string{}}
	var reach []string
	seen := map[string]bool{"start": true}
	queue := []string{"start"}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		reach = append(reach, n)
		for _, r := range refsOf(g.body(n)) {
			if !seen[r] {
				seen[r] = true
				queue = append(queue, r)
			}
		}
	}
	fmt.Fprintf(&w.b, "%s ::= %s\n", opts.Root, w.name("start"))
	for _, n := range g.order {
		if !seen[n] {
			continue
		}
		body, err := w.expr(g.body(n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&w.b, "%s ::= %s\n", w.name(n), body)
		if w.b.Len() > MaxGBNF {
			return "", &UnsupportedError{Construct: "a grammar this large", Where: fmt.Sprintf("its GBNF passes %d bytes", MaxGBNF)}
		}
	}
	w.b.WriteString(w.setRules.String())
	if w.b.Len() > MaxGBNF {
		return "", &UnsupportedError{Construct: "a grammar this large", Where: fmt.Sprintf("its GBNF passes %d bytes", MaxGBNF)}
	}
	return w.b.String(), nil
}

type writer struct {
	g        *Grammar
	opts     Options
	b        strings.Builder
	sets     map[string]string // a character set's class text -> its rule
	setRules strings.Builder
}

func (w *writer) name(n string) string {
	kind := "r-"
	if isTerminal(n) {
		kind = "t-"
	}
	return w.opts.Prefix + kind + strings.ReplaceAll(n, "_", "-")
}

func (w *writer) expr(e expr) (string, error) {
	switch x := e.(type) {
	case alt:
		parts := make([]string, len(x))
		for i, y := range x {
			s, err := w.expr(y)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return "(" + strings.Join(parts, " | ") + ")", nil
	case seq:
		if len(x) == 0 {
			return `""`, nil
		}
		parts := make([]string, len(x))
		for i, y := range x {
			s, err := w.expr(y)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return "(" + strings.Join(parts, " ") + ")", nil
	case rep:
		s, err := w.expr(x.x)
		if err != nil {
			return "", err
		}
		if x.min > maxCount || x.max > maxCount {
			return "", &UnsupportedError{Construct: fmt.Sprintf("a repetition count over %d", maxCount), Where: fmt.Sprintf("{%d,%d}", x.min, x.max)}
		}
		s = "(" + s + ")"
		switch {
		case x.min == 0 && x.max == 1:
			return s + "?", nil
		case x.min == 0 && x.max < 0:
			return s + "*", nil
		case x.min == 1 && x.max < 0:
			return s + "+", nil
		case x.max < 0:
			return fmt.Sprintf("%s{%d,}", s, x.min), nil
		case x.min == x.max:
			return fmt.Sprintf("%s{%d}", s, x.min), nil
		}
		return fmt.Sprintf("%s{%d,%d}", s, x.min, x.max), nil
	case ref:
		return w.name(x.name), nil
	case lit:
		return w.literal(x), nil
	case chars:
		return w.set(x.set)
	case regex:
		return w.expr(x.tree)
	}
	return "", fmt.Errorf("lark: unknown expression %T", e)
}

// jsonEscape is the JSON escape of r, or "" when JSON writes r as itself.
func jsonEscape(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return ""
}

// encode is s as the text is written: itself, or its JSON string body.
func (w *writer) encode(s string) string {
	if !w.opts.JSONString {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if e := jsonEscape(r); e != "" {
			b.WriteString(e)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (w *writer) literal(l lit) string {
	if !l.fold {
		return gbnfLiteral(w.encode(l.s))
	}
	var parts []string
	var run strings.Builder
	flush := func() {
		if run.Len() > 0 {
			parts = append(parts, gbnfLiteral(w.encode(run.String())))
			run.Reset()
		}
	}
	for _, r := range l.s {
		if r < 0x80 && unicode.IsLetter(r) {
			flush()
			parts = append(parts, "["+string(unicode.ToLower(r))+string(unicode.ToUpper(r))+"]")
			continue
		}
		run.WriteRune(r)
	}
	flush()
	if len(parts) == 0 {
		return `""`
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// specials are the characters a JSON string must escape.
var specials = charSet{{0, 0x1f}, {'"', '"'}, {'\\', '\\'}}

// set is one character of s: a class, and under JSONString the escapes of
// the members JSON must escape, as a shared rule.
func (w *writer) set(s charSet) (string, error) {
	if len(s) == 0 {
		return "", &UnsupportedError{Construct: "a character class that matches nothing"}
	}
	if !w.opts.JSONString {
		return gbnfClass(s), nil
	}
	plain, esc := s.minus(specials), s.intersect(specials)
	var alts []string
	if len(plain) > 0 {
		alts = append(alts, gbnfClass(plain))
	}
	for _, r := range esc {
		for c := r.lo; c <= r.hi; c++ {
			alts = append(alts, gbnfLiteral(jsonEscape(c)))
		}
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	body := strings.Join(alts, " | ")
	if name, ok := w.sets[body]; ok {
		return name, nil
	}
	name := fmt.Sprintf("%sc-%d", w.opts.Prefix, len(w.sets))
	w.sets[body] = name
	fmt.Fprintf(&w.setRules, "%s ::= %s\n", name, body)
	return name, nil
}

// gbnfLiteral is a GBNF string literal matching s.
func gbnfLiteral(s string) string { return grammar.Literal(s) }

// gbnfClass is a GBNF character class of s: its ranges, or the negation of
// its complement when that is shorter.
func gbnfClass(s charSet) string {
	neg := ""
	if c := s.complement(); len(c) > 0 && len(c) < len(s) || len(c) > 0 && s[len(s)-1].hi == unicode.MaxRune {
		s, neg = c, "^"
	}
	var b strings.Builder
	b.WriteString("[" + neg)
	for _, r := range s {
		b.WriteString(classChar(r.lo))
		if r.hi > r.lo {
			if r.hi > r.lo+1 {
				b.WriteByte('-')
			}
			b.WriteString(classChar(r.hi))
		}
	}
	b.WriteByte(']')
	return b.String()
}

func classChar(r rune) string {
	switch {
	case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		return string(r)
	case r < 0x100:
		return fmt.Sprintf(`\x%02X`, r)
	case r < 0x10000:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

// Translate parses a Lark grammar and writes it as GBNF (Parse, then GBNF).
func Translate(text string, opts Options) (string, error) {
	g, err := Parse(text)
	if err != nil {
		return "", err
	}
	return g.GBNF(opts)
}
