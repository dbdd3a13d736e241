package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxPattern bounds a pattern's length.
const maxPattern = 4096

// jsonUnsafe are the code points a JSON string cannot hold unescaped.
const jsonUnsafe = `"\\\x7F\x00-\x1F`

// pattern translates a JSON Schema pattern into a GBNF expression for the
// JSON-encoded text between a string's quotes.
func (c *converter) pattern(p, path string) (string, error) {
	if len(p) > maxPattern {
		return "", &LimitError{Limit: "pattern length", Max: maxPattern, Path: path + "/pattern"}
	}
	if !utf8.ValidString(p) {
		return "", &InvalidError{Path: path + "/pattern", Reason: "pattern is not UTF-8"}
	}
	body := p
	start := strings.HasPrefix(body, "^")
	if start {
		body = body[1:]
	}
	end := strings.HasSuffix(body, "$") && !strings.HasSuffix(body, `\$`)
	if end {
		body = body[:len(body)-1]
	}
	pp := &patternParser{c: c, src: []rune(body), path: path}
	expr, topAlt, _, err := pp.parseAlt(0)
	if err != nil {
		return "", err
	}
	if pp.pos < len(pp.src) {
		return "", pp.unsupported(fmt.Sprintf("unexpected %q", string(pp.src[pp.pos])))
	}
	if topAlt && (start || end) && !(start && end) {
		return "", pp.unsupported("an anchor on one side of a top-level alternation")
	}
	if expr == "" {
		expr = `""`
	}
	var parts []string
	if !start {
		parts = append(parts, c.prim("char")+"*")
	}
	parts = append(parts, "("+expr+")")
	if !end {
		parts = append(parts, c.prim("char")+"*")
	}
	return strings.Join(parts, " "), nil
}

type patternParser struct {
	c    *converter
	src  []rune
	pos  int
	path string
}

func (p *patternParser) unsupported(why string) error {
	return &UnsupportedError{Keyword: "pattern", Path: p.path, Reason: why}
}

func (p *patternParser) peek() (rune, bool) {
	if p.pos >= len(p.src) {
		return 0, false
	}
	return p.src[p.pos], true
}

// parseAlt parses alternatives until ")" or the end; alt reports whether
// there was a "|", weight sums the repetition counts inside (see
// repeatExpr).
func (p *patternParser) parseAlt(depth int) (expr string, alt bool, weight int, err error) {
	if depth > p.c.lim.MaxDepth {
		return "", false, 0, &LimitError{Limit: "MaxDepth", Max: p.c.lim.MaxDepth, Path: p.path + "/pattern"}
	}
	var alts []string
	for {
		seq, w, err := p.parseSeq(depth)
		if err != nil {
			return "", false, 0, err
		}
		weight += w
		if seq == "" {
			seq = `""`
		}
		alts = append(alts, seq)
		r, ok := p.peek()
		if !ok || r != '|' {
			break
		}
		p.pos++
	}
	return strings.Join(alts, " | "), len(alts) > 1, weight, nil
}

func (p *patternParser) parseSeq(depth int) (string, int, error) {
	var items []string
	weight := 0
	for {
		r, ok := p.peek()
		if !ok || r == '|' || r == ')' {
			return strings.Join(items, " "), weight, nil
		}
		atom, w, err := p.parseAtom(depth)
		if err != nil {
			return "", 0, err
		}
		atom, w, err = p.parseQuantifier(atom, w)
		if err != nil {
			return "", 0, err
		}
		weight += w
		items = append(items, atom)
	}
}

func (p *patternParser) parseAtom(depth int) (string, int, error) {
	r := p.src[p.pos]
	p.pos++
	switch r {
	case '(':
		if strings.HasPrefix(string(p.src[p.pos:]), "?:") {
			p.pos += 2
		} else if strings.HasPrefix(string(p.src[p.pos:]), "?<") && !strings.HasPrefix(string(p.src[p.pos:]), "?<=") && !strings.HasPrefix(string(p.src[p.pos:]), "?<!") {
			i := p.pos + 2
			for i < len(p.src) && p.src[i] != '>' {
				i++
			}
			if i >= len(p.src) {
				return "", 0, p.unsupported("unterminated group name")
			}
			p.pos = i + 1
		} else if r2, ok := p.peek(); ok && r2 == '?' {
			return "", 0, p.unsupported("lookaround and other (?...) groups")
		}
		inner, _, w, err := p.parseAlt(depth + 1)
		if err != nil {
			return "", 0, err
		}
		if r2, ok := p.peek(); !ok || r2 != ')' {
			return "", 0, &InvalidError{Path: p.path + "/pattern", Reason: "unbalanced parenthesis"}
		}
		p.pos++
		if inner == "" {
			inner = `""`
		}
		return "(" + inner + ")", w, nil
	case ')':
		return "", 0, &InvalidError{Path: p.path + "/pattern", Reason: "unbalanced parenthesis"}
	case '[':
		e, err := p.parseClass()
		return e, 0, err
	case '.':
		return `[^` + jsonUnsafe + `]`, 0, nil
	case '^', '$':
		return "", 0, p.unsupported(fmt.Sprintf("anchor %q inside the pattern (only at its ends)", r))
	case '*', '+', '?':
		return "", 0, &InvalidError{Path: p.path + "/pattern", Reason: fmt.Sprintf("quantifier %q with nothing to repeat", r)}
	case '\\':
		set, neg, single, err := p.parseEscape(false)
		if err != nil {
			return "", 0, err
		}
		if single >= 0 {
			return litJSON(single), 0, nil
		}
		e, err := classExpr(set, neg)
		return e, 0, err
	default:
		return litJSON(r), 0, nil
	}
}

// parseQuantifier applies a following ?, *, +, {m}, {m,} or {m,n}.
func (p *patternParser) parseQuantifier(atom string, weight int) (string, int, error) {
	r, ok := p.peek()
	if !ok {
		return atom, weight, nil
	}
	min, max := -2, -2
	switch r {
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
		rest := string(p.src[p.pos:])
		i := strings.IndexByte(rest, '}')
		if i < 0 {
			return atom, weight, nil // a literal "{" (parsed next)
		}
		spec := rest[1:i]
		lo, hi, isQ := parseBraces(spec)
		if !isQ {
			return atom, weight, nil
		}
		min, max = lo, hi
		p.pos += utf8.RuneCountInString(rest[:i+1])
	default:
		return atom, weight, nil
	}
	if r2, ok := p.peek(); ok && (r2 == '?' || r2 == '+') {
		return "", 0, p.unsupported("lazy or possessive quantifiers")
	}
	return p.c.repeatExpr(atom, min, max, weight, p.path+"/pattern")
}

// parseBraces reads "m", "m," or "m,n".
func parseBraces(spec string) (int, int, bool) {
	lo, hi, comma := spec, spec, false
	if i := strings.IndexByte(spec, ','); i >= 0 {
		lo, hi, comma = spec[:i], spec[i+1:], true
	}
	m, err := strconv.Atoi(lo)
	if err != nil || m < 0 || lo == "" || strings.ContainsAny(lo, "+-") {
		return 0, 0, false
	}
	if !comma {
		return m, m, true
	}
	if hi == "" {
		return m, -1, true
	}
	n, err := strconv.Atoi(hi)
	if err != nil || n < m || strings.ContainsAny(hi, "+-") {
		return 0, 0, false
	}
	return m, n, true
}

// runeRange is an inclusive code point range.
type runeRange struct{ lo, hi rune }

var (
	digitSet = []runeRange{{'0', '9'}}
	wordSet  = []runeRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceSet = []runeRange{{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0xfeff, 0xfeff}, {0x2028, 0x2029}}
)

// parseEscape reads the escape after "\": a single code point (single >= 0)
// or a class (set, negated).
func (p *patternParser) parseEscape(inClass bool) (set []runeRange, neg bool, single rune, err error) {
	r, ok := p.peek()
	if !ok {
		return nil, false, -1, &InvalidError{Path: p.path + "/pattern", Reason: "trailing backslash"}
	}
	p.pos++
	switch r {
	case 'd':
		return digitSet, false, -1, nil
	case 'D':
		return digitSet, true, -1, nil
	case 'w':
		return wordSet, false, -1, nil
	case 'W':
		return wordSet, true, -1, nil
	case 's':
		return spaceSet, false, -1, nil
	case 'S':
		return spaceSet, true, -1, nil
	case 'n':
		return nil, false, '\n', nil
	case 't':
		return nil, false, '\t', nil
	case 'r':
		return nil, false, '\r', nil
	case 'f':
		return nil, false, '\f', nil
	case 'v':
		return nil, false, '\v', nil
	case '0':
		return nil, false, 0, nil
	case 'x', 'u':
		n := 2
		if r == 'u' {
			n = 4
		}
		if p.pos+n > len(p.src) {
			return nil, false, -1, &InvalidError{Path: p.path + "/pattern", Reason: `short \` + string(r) + ` escape`}
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return nil, false, -1, &InvalidError{Path: p.path + "/pattern", Reason: `bad \` + string(r) + ` escape`}
		}
		p.pos += n
		if v >= 0xd800 && v <= 0xdfff {
			return nil, false, -1, p.unsupported("surrogate escapes")
		}
		return nil, false, rune(v), nil
	case 'b':
		if inClass {
			return nil, false, '\b', nil
		}
		return nil, false, -1, p.unsupported(`\b word boundaries`)
	}
	if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '1' && r <= '9') {
		return nil, false, -1, p.unsupported(fmt.Sprintf(`escape \%c`, r))
	}
	return nil, false, r, nil // an escaped punctuation character stands for itself
}

func (p *patternParser) parseClass() (string, error) {
	neg := false
	if r, ok := p.peek(); ok && r == '^' {
		neg = true
		p.pos++
	}
	var set []runeRange
	first := true
	for {
		r, ok := p.peek()
		if !ok {
			return "", &InvalidError{Path: p.path + "/pattern", Reason: "unterminated character class"}
		}
		if r == ']' && !first {
			p.pos++
			break
		}
		first = false
		p.pos++
		lo := r
		if r == '\\' {
			s, n, single, err := p.parseEscape(true)
			if err != nil {
				return "", err
			}
			if single < 0 {
				if n {
					return "", p.unsupported(`\D, \W or \S inside a class`)
				}
				set = append(set, s...)
				continue
			}
			lo = single
		} else if r == '[' {
			if nx, ok := p.peek(); ok && (nx == ':' || nx == '=' || nx == '.') {
				return "", p.unsupported("POSIX classes")
			}
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			h := p.src[p.pos]
			p.pos++
			if h == '\\' {
				s, _, single, err := p.parseEscape(true)
				if err != nil {
					return "", err
				}
				if single < 0 || s != nil {
					return "", p.unsupported("a class escape as a range end")
				}
				h = single
			}
			if h < lo {
				return "", &InvalidError{Path: p.path + "/pattern", Reason: "character range out of order"}
			}
			hi = h
		}
		set = append(set, runeRange{lo, hi})
	}
	return classExpr(set, neg)
}

// classExpr is a GBNF expression for one code point of set (or of its
// complement), written as JSON string content: code points JSON escapes
// are produced in escaped form when the set names them, never by a
// complement.
func classExpr(set []runeRange, neg bool) (string, error) {
	var b strings.Builder
	if neg {
		b.WriteString("[^")
		for _, r := range set {
			writeRange(&b, r)
		}
		b.WriteString(jsonUnsafe + "]")
		return b.String(), nil
	}
	var alts []string
	var plain strings.Builder
	for _, r := range set {
		lo, hi := r.lo, r.hi
		for x := lo; x <= hi && x <= 0x20; x++ {
			if x < 0x20 {
				alts = append(alts, litJSON(x))
			}
		}
		if lo < 0x20 {
			lo = 0x20
		}
		for _, cut := range []rune{'"', '\\', 0x7f} {
			if lo <= cut && cut <= hi {
				alts = append(alts, litJSON(cut))
				if lo < cut {
					writeRange(&plain, runeRange{lo, cut - 1})
				}
				lo = cut + 1
			}
		}
		if lo <= hi {
			writeRange(&plain, runeRange{lo, hi})
		}
	}
	if plain.Len() > 0 {
		alts = append([]string{"[" + plain.String() + "]"}, alts...)
	}
	if len(alts) == 0 {
		return "", &InvalidError{Reason: "empty character class"}
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

func writeRange(b *strings.Builder, r runeRange) {
	b.WriteString(classChar(r.lo))
	if r.hi != r.lo {
		b.WriteByte('-')
		b.WriteString(classChar(r.hi))
	}
}

// litJSON is a GBNF literal for code point r as JSON string content.
func litJSON(r rune) string {
	switch r {
	case '"':
		return lit(`\"`)
	case '\\':
		return lit(`\\`)
	case '\n':
		return lit(`\n`)
	case '\r':
		return lit(`\r`)
	case '\t':
		return lit(`\t`)
	case '\b':
		return lit(`\b`)
	case '\f':
		return lit(`\f`)
	}
	if r < 0x20 || r == 0x7f {
		return lit(fmt.Sprintf(`\u%04x`, r))
	}
	return lit(string(r))
}
