package lark

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Character classes. The positive forms are the ASCII members (a subset of
// Python's Unicode classes); inside a negated class each stands for its
// ASCII members and everything outside ASCII (a superset), so that the
// negation is again a subset of Python's.
var (
	classDigit = charSet{{'0', '9'}}
	classWord  = charSet{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// classSpace is Python's \s for str patterns, exactly.
	classSpace = charSet{{'\t', '\r'}, {0x1c, ' '}, {0x85, 0x85}, {0xa0, 0xa0}, {0x1680, 0x1680},
		{0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}}
	nonASCII = charSet{{0x80, unicode.MaxRune}}
	ascii    = charSet{{0, 0x7f}}
)

// Regex translates one regular expression (a custom tool's "regex"
// syntax, or a Lark /.../ terminal) with the flags given (i, s, m, u) into
// a grammar whose start rule is the whole pattern.
func Regex(pattern, flags string) (*Grammar, error) {
	for _, f := range flags {
		if !strings.ContainsRune("imsu", f) {
			return nil, &UnsupportedError{Construct: fmt.Sprintf("the %q flag", f), Where: "regex"}
		}
	}
	tree, err := parseRegex(pattern, flags)
	if err != nil {
		if ue, ok := err.(*UnsupportedError); ok {
			ue.Where = "regex " + strconv.Quote(pattern)
			return nil, ue
		}
		return nil, &SyntaxError{Reason: fmt.Sprintf("regex %q: %v", pattern, err)}
	}
	g := &Grammar{rules: map[string]expr{"start": regex{src: pattern, flags: flags, tree: tree}}, terms: map[string]expr{},
		order: []string{"start"}, line: map[string]int{"start": 0}}
	return g, nil
}

type rxParser struct {
	src    []rune
	pos    int
	fold   bool
	dotAll bool
}

func parseRegex(src, flags string) (expr, error) {
	p := &rxParser{src: []rune(src), fold: strings.Contains(flags, "i"), dotAll: strings.Contains(flags, "s")}
	e, err := p.alternation()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("unbalanced %q at %d", p.src[p.pos], p.pos)
	}
	return e, nil
}

func unsupported(construct string) error { return &UnsupportedError{Construct: construct} }

func (p *rxParser) more() bool { return p.pos < len(p.src) }
func (p *rxParser) peek() rune { return p.src[p.pos] }
func (p *rxParser) at(s string) bool {
	return strings.HasPrefix(string(p.src[p.pos:]), s)
}

func (p *rxParser) alternation() (expr, error) {
	var alts []expr
	for {
		s, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if p.more() && p.peek() == '|' {
			p.pos++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alt(alts), nil
}

func (p *rxParser) sequence() (expr, error) {
	var items seq
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		a, err = p.quantified(a)
		if err != nil {
			return nil, err
		}
		items = append(items, a)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return items, nil
}

func (p *rxParser) quantified(a expr) (expr, error) {
	for p.more() {
		var min, max int
		switch c := p.peek(); c {
		case '?':
			min, max = 0, 1
			p.pos++
		case '*':
			min, max = 0, -1
			p.pos++
		case '+':
			min, max = 1, -1
			p.pos++
		case '{':
			lo, hi, ok := p.braces()
			if !ok {
				return a, nil // a literal "{", as Python reads it
			}
			min, max = lo, hi
		default:
			return a, nil
		}
		if p.more() && p.peek() == '?' {
			return nil, unsupported("a lazy quantifier")
		}
		if p.more() && p.peek() == '+' {
			return nil, unsupported("a possessive quantifier")
		}
		if _, isRep := a.(rep); isRep {
			return nil, unsupported("a quantifier applied to a quantifier")
		}
		a = rep{a, min, max}
	}
	return a, nil
}

// braces reads {m}, {m,}, {,n} or {m,n}; false (position kept) when the
// text is not a quantifier.
func (p *rxParser) braces() (int, int, bool) {
	end := p.pos + 1
	for end < len(p.src) && p.src[end] != '}' {
		end++
	}
	if end >= len(p.src) {
		return 0, 0, false
	}
	body := string(p.src[p.pos+1 : end])
	lo, hi, comma := strings.Cut(body, ",")
	num := func(s string, def int) (int, bool) {
		if s == "" {
			return def, true
		}
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	l, ok1 := num(lo, 0)
	h := l
	ok2 := true
	if comma {
		h, ok2 = num(hi, -1)
	}
	if !ok1 || !ok2 || lo == "" && !comma || h >= 0 && h < l {
		return 0, 0, false
	}
	p.pos = end + 1
	return l, h, true
}

func (p *rxParser) atom() (expr, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		switch {
		case p.at("?:"):
			p.pos += 2
		case p.at("?P<"):
			end := p.pos
			for end < len(p.src) && p.src[end] != '>' {
				end++
			}
			p.pos = end + 1
		case p.at("?="), p.at("?!"), p.at("?<="), p.at("?<!"):
			return nil, unsupported("lookaround")
		case p.at("?P="):
			return nil, unsupported("a backreference")
		case p.at("?"):
			return nil, unsupported("an inline group flag or extension (?...)")
		}
		e, err := p.alternation()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, errors.New("missing )")
		}
		p.pos++
		return e, nil
	case ')':
		return nil, errors.New("unbalanced )")
	case '[':
		return p.class()
	case '.':
		p.pos++
		if p.dotAll {
			return chars{charSet{{0, unicode.MaxRune}}}, nil
		}
		return chars{single('\n').complement()}, nil
	case '^', '$':
		return nil, unsupported(fmt.Sprintf("the anchor %q", c))
	case '*', '+', '?':
		return nil, fmt.Errorf("nothing to repeat before %q", c)
	case '\\':
		set, r, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		if set != nil {
			return chars{p.foldSet(set)}, nil
		}
		return p.char(r), nil
	}
	p.pos++
	return p.char(c), nil
}

// char is the single character r (in either case under the i flag).
func (p *rxParser) char(r rune) expr {
	if p.fold {
		return chars{single(r).folded()}
	}
	return chars{single(r)}
}

func (p *rxParser) foldSet(s charSet) charSet {
	if p.fold {
		return s.folded()
	}
	return s
}

// escape reads a backslash escape: a class (set) or one character.
// inClass: inside [...], where \b is a backspace.
func (p *rxParser) escape(inClass bool) (charSet, rune, error) {
	p.pos++ // the backslash
	if !p.more() {
		return nil, 0, errors.New("trailing backslash")
	}
	c := p.peek()
	p.pos++
	switch c {
	case 'd':
		return classDigit, 0, nil
	case 'w':
		return classWord, 0, nil
	case 's':
		return classSpace, 0, nil
	case 'D':
		return ascii.minus(classDigit), 0, nil
	case 'W':
		return ascii.minus(classWord), 0, nil
	case 'S':
		return classSpace.complement(), 0, nil
	case 'n':
		return nil, '\n', nil
	case 't':
		return nil, '\t', nil
	case 'r':
		return nil, '\r', nil
	case 'f':
		return nil, '\f', nil
	case 'v':
		return nil, '\v', nil
	case 'a':
		return nil, '\a', nil
	case '0':
		return nil, 0, nil
	case 'b':
		if inClass {
			return nil, '\b', nil
		}
		return nil, 0, unsupported(`the anchor \b`)
	case 'B', 'A', 'Z':
		return nil, 0, unsupported(`the anchor \` + string(c))
	case 'x', 'u', 'U':
		n := map[rune]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return nil, 0, fmt.Errorf(`short \%c escape`, c)
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil || v > utf8.MaxRune {
			return nil, 0, fmt.Errorf(`bad \%c escape`, c)
		}
		p.pos += n
		return nil, rune(v), nil
	case 'p', 'P', 'N':
		return nil, 0, unsupported(`the escape \` + string(c))
	}
	if c >= '1' && c <= '9' {
		return nil, 0, unsupported("a backreference")
	}
	if unicode.IsLetter(c) || unicode.IsDigit(c) {
		return nil, 0, fmt.Errorf(`unknown escape \%c`, c)
	}
	return nil, c, nil // an escaped punctuation character is itself
}

// class reads [...].
func (p *rxParser) class() (expr, error) {
	p.pos++ // [
	neg := false
	if p.more() && p.peek() == '^' {
		neg = true
		p.pos++
	}
	var set charSet
	first := true
	for {
		if !p.more() {
			return nil, errors.New("missing ]")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		first = false
		if c == '[' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == ':' || p.src[p.pos+1] == '=' || p.src[p.pos+1] == '.') {
			return nil, unsupported("a POSIX class or nested set")
		}
		lo, isSet, err := p.classAtom(neg)
		if err != nil {
			return nil, err
		}
		if isSet != nil {
			set = append(set, isSet...)
			continue
		}
		if p.more() && p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hiSet, err := p.classAtom(neg)
			if err != nil {
				return nil, err
			}
			if hiSet != nil || hi < lo {
				return nil, errors.New("bad range in class")
			}
			set = append(set, runeRange{lo, hi})
			continue
		}
		set = append(set, runeRange{lo, lo})
	}
	set = set.normalize()
	if p.fold {
		set = set.folded()
	}
	if neg {
		set = set.complement()
		if p.fold {
			// Python folds beyond ASCII: leave non-ASCII out (a subset)
			set = set.intersect(ascii)
		}
	}
	if len(set) == 0 {
		return nil, errors.New("the class matches no character")
	}
	return chars{set}, nil
}

// classAtom reads one member of a class: a character, or a class escape
// (as a set, widened to everything outside ASCII inside a negated class).
func (p *rxParser) classAtom(neg bool) (rune, charSet, error) {
	if p.peek() != '\\' {
		r := p.peek()
		p.pos++
		return r, nil, nil
	}
	save := p.pos
	set, r, err := p.escape(true)
	if err != nil {
		return 0, nil, err
	}
	if set != nil {
		if neg {
			switch p.src[save+1] {
			case 'd', 'w':
				set = append(set.normalize(), nonASCII...).normalize()
			case 'D', 'W':
				// their positive forms are ASCII-only already (a subset);
				// negated they would admit non-ASCII text Python rejects
				return 0, nil, unsupported(`\D or \W inside a negated class`)
			}
		}
		return 0, set, nil
	}
	return r, nil, nil
}
