package lark

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Grammar is a parsed Lark grammar: its rules and terminals by name.
type Grammar struct {
	rules map[string]expr // rule name (prefixes ? ! stripped) -> expansion
	terms map[string]expr // terminal name -> expansion
	order []string        // names in definition order
	line  map[string]int  // where each was defined
}

// MaxSize bounds the grammar text Parse reads.
const MaxSize = 1 << 20

// Parse reads the text of a Lark grammar. Its start rule is "start".
func Parse(text string) (*Grammar, error) {
	g, err := parse(text)
	if err != nil {
		return nil, err
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	return g, nil
}

// parse reads grammar text without checking it.
func parse(text string) (*Grammar, error) {
	if len(text) > MaxSize {
		return nil, &SyntaxError{Reason: fmt.Sprintf("grammar is %d bytes, over the limit of %d", len(text), MaxSize)}
	}
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	g := &Grammar{rules: map[string]expr{}, terms: map[string]expr{}, line: map[string]int{}}
	p := &parser{toks: toks, g: g}
	if err := p.file(); err != nil {
		return nil, err
	}
	return g, nil
}

type tokKind int

const (
	tName tokKind = iota
	tString
	tRegex
	tNumber
	tOp
	tDirective
	tNL
	tEOF
)

type token struct {
	kind tokKind
	text string // name, op, directive; a string's or regex's source
	line int
	// for strings: the value and the i flag; for regexes: the flags
	value string
	flags string
}

func lex(src string) ([]token, error) {
	var toks []token
	line := 1
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			toks = append(toks, token{kind: tNL, line: line})
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					return nil, &SyntaxError{Line: line, Reason: "string literal runs past the end of the line"}
				}
				j++
			}
			if j >= len(src) {
				return nil, &SyntaxError{Line: line, Reason: "string literal is not closed"}
			}
			val, err := unescapeString(src[i+1 : j])
			if err != nil {
				return nil, &SyntaxError{Line: line, Reason: err.Error()}
			}
			j++
			flags := ""
			for j < len(src) && isFlag(src[j]) {
				flags += string(src[j])
				j++
			}
			toks = append(toks, token{kind: tString, text: src[i:j], line: line, value: val, flags: flags})
			i = j
		case c == '/':
			j := i + 1
			for j < len(src) && src[j] != '/' {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					return nil, &SyntaxError{Line: line, Reason: "regular expression runs past the end of the line"}
				}
				j++
			}
			if j >= len(src) {
				return nil, &SyntaxError{Line: line, Reason: "regular expression is not closed"}
			}
			body := strings.ReplaceAll(src[i+1:j], `\/`, `/`)
			j++
			flags := ""
			for j < len(src) && isFlag(src[j]) {
				flags += string(src[j])
				j++
			}
			toks = append(toks, token{kind: tRegex, text: src[i:j], line: line, value: body, flags: flags})
			i = j
		case c == '%':
			j := i + 1
			for j < len(src) && isNameByte(src[j]) {
				j++
			}
			toks = append(toks, token{kind: tDirective, text: src[i:j], line: line})
			i = j
		case isNameStart(c):
			j := i
			for j < len(src) && isNameByte(src[j]) {
				j++
			}
			toks = append(toks, token{kind: tName, text: src[i:j], line: line})
			i = j
		case c >= '0' && c <= '9' || c == '-' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i + 1
			for j < len(src) && src[j] >= '0' && src[j] <= '9' {
				j++
			}
			toks = append(toks, token{kind: tNumber, text: src[i:j], line: line})
			i = j
		case strings.HasPrefix(src[i:], "->"), strings.HasPrefix(src[i:], ".."):
			toks = append(toks, token{kind: tOp, text: src[i : i+2], line: line})
			i += 2
		case strings.ContainsRune(":|()[]?*+~.,{}!", rune(c)):
			toks = append(toks, token{kind: tOp, text: string(c), line: line})
			i++
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, &SyntaxError{Line: line, Reason: fmt.Sprintf("unexpected character %q", r)}
		}
	}
	return append(toks, token{kind: tEOF, line: line}), nil
}

func isFlag(c byte) bool      { return c >= 'a' && c <= 'z' }
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNameByte(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// isTerminal reports whether name names a terminal (uppercase, as Lark has it).
func isTerminal(name string) bool {
	s := strings.TrimLeft(strings.TrimPrefix(name, "common__"), "_")
	return s != "" && s[0] >= 'A' && s[0] <= 'Z'
}

// unescapeString is the value of a Lark string literal's body (Python's
// escapes).
func unescapeString(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i >= len(s) {
			return "", fmt.Errorf("string literal ends with a backslash")
		}
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case '0':
			b.WriteByte(0)
		case '\\', '"', '\'':
			b.WriteByte(c)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+n >= len(s) {
				return "", fmt.Errorf(`string literal has a short \%c escape`, c)
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil || v > utf8.MaxRune {
				return "", fmt.Errorf(`string literal has a bad \%c escape`, c)
			}
			b.WriteRune(rune(v))
			i += n
		default:
			// Python keeps an unknown escape as written.
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

type parser struct {
	toks []token
	pos  int
	g    *Grammar
	// depth of (...) and [...]: newlines inside them do not end a definition
	depth int
}

func (p *parser) peek() token {
	for p.depth > 0 && p.toks[p.pos].kind == tNL {
		p.pos++
	}
	return p.toks[p.pos]
}

func (p *parser) next() token {
	t := p.peek()
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *parser) expect(s string) error {
	t := p.next()
	if t.kind != tOp || t.text != s {
		return p.errAt(t, "expected %q", s)
	}
	return nil
}

func (p *parser) errAt(t token, format string, args ...any) error {
	found := t.text
	switch t.kind {
	case tNL:
		found = "end of line"
	case tEOF:
		found = "end of grammar"
	}
	return &SyntaxError{Line: t.line, Reason: fmt.Sprintf(format, args...) + fmt.Sprintf(", found %s", strconv.Quote(found))}
}

func (p *parser) file() error {
	for {
		t := p.peek()
		switch t.kind {
		case tEOF:
			return nil
		case tNL:
			p.next()
		case tDirective:
			if err := p.directive(); err != nil {
				return err
			}
		default:
			if err := p.definition(); err != nil {
				return err
			}
		}
	}
}

// endStatement consumes the end of a statement: a newline or the end.
func (p *parser) endStatement() error {
	t := p.next()
	if t.kind != tNL && t.kind != tEOF {
		return p.errAt(t, "expected the end of the line")
	}
	return nil
}

func (p *parser) definition() error {
	t := p.next()
	if t.kind == tOp && (t.text == "?" || t.text == "!") {
		t = p.next()
	}
	if t.kind != tName {
		return p.errAt(t, "expected a rule or terminal name")
	}
	name := t.text
	if p.isOp("{") {
		return &UnsupportedError{Construct: "a rule template", Where: fmt.Sprintf("line %d: %s{...}", t.line, name)}
	}
	if p.isOp(".") {
		p.next()
		if n := p.next(); n.kind != tNumber {
			return p.errAt(n, "expected a priority number after %s.", name)
		}
	}
	if err := p.expect(":"); err != nil {
		return err
	}
	body, err := p.expansions(true)
	if err != nil {
		return err
	}
	if _, dup := p.g.line[name]; dup {
		return &SyntaxError{Line: t.line, Reason: fmt.Sprintf("%s is defined twice (first on line %d)", name, p.g.line[name])}
	}
	p.g.line[name] = t.line
	p.g.order = append(p.g.order, name)
	if isTerminal(name) {
		p.g.terms[name] = body
	} else {
		p.g.rules[name] = body
	}
	return p.endStatement()
}

// expansions reads alternatives; at top level an alternative may begin on
// a new line with "|".
func (p *parser) expansions(top bool) (expr, error) {
	var alts []expr
	for {
		a, err := p.alternative()
		if err != nil {
			return nil, err
		}
		alts = append(alts, a)
		if p.isOp("|") {
			p.next()
			continue
		}
		if top {
			// a newline, then "|": the alternatives go on
			j := p.pos
			for p.toks[j].kind == tNL {
				j++
			}
			if j > p.pos && p.toks[j].kind == tOp && p.toks[j].text == "|" {
				p.pos = j + 1
				continue
			}
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alt(alts), nil
}

func (p *parser) alternative() (expr, error) {
	var items seq
	for {
		t := p.peek()
		if t.kind == tOp && t.text == "->" {
			p.next()
			if n := p.next(); n.kind != tName {
				return nil, p.errAt(n, "expected an alias name after ->")
			}
			break
		}
		if !(t.kind == tName || t.kind == tString || t.kind == tRegex || t.kind == tOp && (t.text == "(" || t.text == "[")) {
			break
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return items, nil
}

func (p *parser) item() (expr, error) {
	a, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tOp {
			return a, nil
		}
		switch t.text {
		case "?":
			a = rep{a, 0, 1}
		case "*":
			a = rep{a, 0, -1}
		case "+":
			a = rep{a, 1, -1}
		case "~":
			p.next()
			lo, err := p.count()
			if err != nil {
				return nil, err
			}
			hi := lo
			if p.isOp("..") {
				p.next()
				if hi, err = p.count(); err != nil {
					return nil, err
				}
			}
			if hi < lo {
				return nil, &SyntaxError{Line: t.line, Reason: fmt.Sprintf("repetition ~ %d..%d counts down", lo, hi)}
			}
			a = rep{a, lo, hi}
			continue
		default:
			return a, nil
		}
		p.next()
	}
}

func (p *parser) count() (int, error) {
	t := p.next()
	n, err := strconv.Atoi(t.text)
	if t.kind != tNumber || err != nil || n < 0 {
		return 0, p.errAt(t, "expected a repetition count")
	}
	return n, nil
}

func (p *parser) atom() (expr, error) {
	t := p.next()
	switch t.kind {
	case tOp:
		closer := map[string]string{"(": ")", "[": "]"}[t.text]
		p.depth++
		e, err := p.expansions(false)
		p.depth--
		if err != nil {
			return nil, err
		}
		if err := p.expect(closer); err != nil {
			return nil, err
		}
		if t.text == "[" {
			return rep{e, 0, 1}, nil
		}
		return e, nil
	case tName:
		if p.isOp("{") {
			return nil, &UnsupportedError{Construct: "a rule template", Where: fmt.Sprintf("line %d: %s{...}", t.line, t.text)}
		}
		return ref{t.text}, nil
	case tString:
		if err := checkFlags(t, "i"); err != nil {
			return nil, err
		}
		if p.isOp("..") {
			p.next()
			hi := p.next()
			if hi.kind != tString {
				return nil, p.errAt(hi, "expected a string after ..")
			}
			lo, hiR := []rune(t.value), []rune(hi.value)
			if len(lo) != 1 || len(hiR) != 1 || lo[0] > hiR[0] {
				return nil, &SyntaxError{Line: t.line, Reason: fmt.Sprintf("range %s..%s needs two single characters in order", t.text, hi.text)}
			}
			set := charSet{{lo[0], hiR[0]}}
			if strings.Contains(t.flags+hi.flags, "i") {
				set = set.folded()
			}
			return chars{set}, nil
		}
		return lit{s: t.value, fold: t.flags == "i"}, nil
	case tRegex:
		if err := checkFlags(t, "imsu"); err != nil {
			return nil, err
		}
		tree, err := parseRegex(t.value, t.flags)
		if err != nil {
			if ue, ok := err.(*UnsupportedError); ok {
				ue.Where = fmt.Sprintf("line %d: %s", t.line, t.text)
				return nil, ue
			}
			return nil, &SyntaxError{Line: t.line, Reason: fmt.Sprintf("regular expression %s: %v", t.text, err)}
		}
		return regex{src: t.value, flags: t.flags, tree: tree}, nil
	}
	return nil, p.errAt(t, "expected a name, string, regular expression or group")
}

func checkFlags(t token, allowed string) error {
	for _, f := range t.flags {
		if !strings.ContainsRune(allowed, f) {
			return &UnsupportedError{Construct: fmt.Sprintf("the %q flag", f), Where: fmt.Sprintf("line %d: %s", t.line, t.text)}
		}
	}
	return nil
}

func (p *parser) directive() error {
	t := p.next()
	switch t.text {
	case "%ignore":
		// accepted; ignored text is never produced (see the package doc)
		if _, err := p.expansions(true); err != nil {
			return err
		}
		return p.endStatement()
	case "%import":
		return p.importCommon(t)
	}
	return &UnsupportedError{Construct: "the " + t.text + " directive", Where: fmt.Sprintf("line %d", t.line)}
}

// importCommon reads %import common.NAME [-> ALIAS] or %import common (A, B).
func (p *parser) importCommon(t token) error {
	var path []string
	for {
		n := p.next()
		if n.kind != tName {
			return p.errAt(n, "expected a module name after %%import")
		}
		path = append(path, n.text)
		if !p.isOp(".") {
			break
		}
		p.next()
	}
	var names [][2]string // name, alias
	if p.isOp("(") {
		p.next()
		for {
			n := p.next()
			if n.kind != tName {
				return p.errAt(n, "expected a name in the import list")
			}
			names = append(names, [2]string{n.text, n.text})
			if p.isOp(",") {
				p.next()
				continue
			}
			if err := p.expect(")"); err != nil {
				return err
			}
			break
		}
	} else {
		if len(path) < 2 {
			return &SyntaxError{Line: t.line, Reason: "%import needs module.NAME or module (NAME, ...)"}
		}
		name := path[len(path)-1]
		path = path[:len(path)-1]
		alias := name
		if p.isOp("->") {
			p.next()
			a := p.next()
			if a.kind != tName {
				return p.errAt(a, "expected an alias after ->")
			}
			alias = a.text
		}
		names = append(names, [2]string{name, alias})
	}
	if len(path) != 1 || path[0] != "common" {
		return &UnsupportedError{Construct: "%import of module " + strconv.Quote(strings.Join(path, ".")), Where: fmt.Sprintf("line %d (only common is built in)", t.line)}
	}
	for _, n := range names {
		if err := p.g.importCommon(n[0], n[1], t.line); err != nil {
			return err
		}
	}
	return p.endStatement()
}
