package jinja

import (
	"fmt"
	"strings"
	"unicode"
)

// segKind is what a piece of template source is.
type segKind int

const (
	segText  segKind = iota
	segVar           // {{ ... }}
	segBlock         // {% ... %}
)

// segment is a piece of template source after whitespace control.
type segment struct {
	kind segKind
	text string // the text, or the tag's inside
	line int
}

// scan cuts src into text and tags, applying what Hugging Face's
// environment sets: newlines normalized to \n, one final newline dropped
// (keep_trailing_newline off), trim_blocks (a block or comment tag eats the
// newline after it) and lstrip_blocks (the spaces and tabs before a block or
// comment tag on its own line are dropped), and the - and + modifiers.
func scan(src string) ([]segment, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	var segs []segment
	pos, line := 0, 1
	lineStart := true // the last token ended a line (or it is the start)
	stripNext := false
	for pos <= len(src) {
		open := nextOpen(src, pos)
		text := src[pos:]
		if open >= 0 {
			text = src[pos:open]
		}
		if stripNext {
			text = strings.TrimLeftFunc(text, unicode.IsSpace)
			stripNext = false
		}
		if open < 0 {
			if text != "" {
				segs = append(segs, segment{kind: segText, text: text, line: line})
			}
			break
		}
		kind := src[open+1]
		mod := byte(0)
		if open+2 < len(src) && (src[open+2] == '-' || src[open+2] == '+') {
			mod = src[open+2]
		}
		switch {
		case mod == '-':
			text = strings.TrimRightFunc(text, unicode.IsSpace)
		case mod != '+' && kind != '{':
			l := strings.LastIndexByte(text, '\n') + 1
			if (l > 0 || lineStart) && l < len(text) && strings.TrimLeft(text[l:], " \t\v\f") == "" {
				text = text[:l]
			}
		}
		if text != "" {
			segs = append(segs, segment{kind: segText, text: text, line: line})
		}
		line += strings.Count(src[pos:open], "\n")
		body := open + 2
		if mod != 0 {
			body++
		}
		var end, after int // end of the inside, end of the closer
		var closeMod byte
		if kind == '#' {
			i := strings.Index(src[body:], "#}")
			if i < 0 {
				return nil, fmt.Errorf("line %d: unclosed comment", line)
			}
			end, after = body+i, body+i+2
		} else {
			closer := "}}"
			if kind == '%' {
				closer = "%}"
			}
			i, err := tagEnd(src, body, closer)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			end, after = i, i+2
		}
		if end > body && (src[end-1] == '-' || src[end-1] == '+') {
			closeMod = src[end-1]
			end--
		}
		inside := src[body:end]
		line += strings.Count(src[open:after], "\n")
		pos = after
		switch {
		case closeMod == '-':
			stripNext = true
		case closeMod != '+' && kind != '{' && pos < len(src) && src[pos] == '\n':
			pos++
			line++
		}
		lineStart = pos > 0 && src[pos-1] == '\n'
		switch kind {
		case '{':
			segs = append(segs, segment{kind: segVar, text: inside, line: line})
		case '%':
			if name := firstWord(inside); name == "raw" {
				raw, next, err := rawBody(src, pos, line)
				if err != nil {
					return nil, err
				}
				if closeMod == '-' {
					raw.text = strings.TrimLeftFunc(raw.text, unicode.IsSpace)
				}
				segs = append(segs, raw)
				pos, stripNext = next.pos, next.strip
				line += strings.Count(raw.text, "\n")
				lineStart = pos > 0 && src[pos-1] == '\n'
				continue
			}
			segs = append(segs, segment{kind: segBlock, text: inside, line: line})
		}
		if pos >= len(src) {
			break
		}
	}
	return segs, nil
}

type rawNext struct {
	pos   int
	strip bool
}

// rawBody reads a {% raw %} body up to its {% endraw %}.
func rawBody(src string, pos, line int) (segment, rawNext, error) {
	for i := pos; i < len(src); {
		j := strings.Index(src[i:], "{%")
		if j < 0 {
			break
		}
		j += i
		k := j + 2
		mod := byte(0)
		if k < len(src) && (src[k] == '-' || src[k] == '+') {
			mod = src[k]
			k++
		}
		rest := strings.TrimLeft(src[k:], " \t\n")
		if !strings.HasPrefix(rest, "endraw") {
			i = j + 2
			continue
		}
		e := strings.Index(src[k:], "%}")
		if e < 0 {
			break
		}
		e += k
		text := src[pos:j]
		if mod == '-' {
			text = strings.TrimRightFunc(text, unicode.IsSpace)
		}
		next := rawNext{pos: e + 2}
		if src[e-1] == '-' {
			next.strip = true
		} else if src[e-1] != '+' && next.pos < len(src) && src[next.pos] == '\n' {
			next.pos++
		}
		return segment{kind: segText, text: text, line: line}, next, nil
	}
	return segment{}, rawNext{}, fmt.Errorf("line %d: raw block not closed", line)
}

func firstWord(s string) string {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) })
	if i < 0 {
		return s
	}
	return s[:i]
}

// nextOpen finds the next {{, {% or {#.
func nextOpen(src string, pos int) int {
	for i := pos; i+1 < len(src); i++ {
		if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
	}
	return -1
}

// tagEnd finds closer after pos outside string literals and brackets.
func tagEnd(src string, pos int, closer string) (int, error) {
	depth := 0
	for i := pos; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\'', '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return 0, fmt.Errorf("unterminated string")
			}
			i = j
		case '(', '[', '{':
			depth++
		case ')', ']':
			if depth > 0 {
				depth--
			}
		case '}', '%':
			if depth == 0 && strings.HasPrefix(src[i:], closer) {
				return i, nil
			}
			if c == '}' && depth > 0 {
				depth--
			}
		}
	}
	return 0, fmt.Errorf("tag not closed (%q expected)", closer)
}

// tokKind is the kind of an expression token.
type tokKind int

const (
	tokEOF tokKind = iota
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
)

type token struct {
	kind tokKind
	text string // name, operator, or the string's value
}

var ops3 = []string{"//", "**", "==", "!=", "<=", ">="}

// lexExpr tokenizes the inside of a tag.
func lexExpr(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, token{tokName, s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			float := false
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
				j++
			}
			if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
				float = true
				j++
				for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
					j++
				}
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && s[k] >= '0' && s[k] <= '9' {
					float = true
					j = k
					for j < len(s) && s[j] >= '0' && s[j] <= '9' {
						j++
					}
				}
			}
			kind := tokInt
			if float {
				kind = tokFloat
			}
			toks = append(toks, token{kind, strings.ReplaceAll(s[i:j], "_", "")})
			i = j
		case c == '\'' || c == '"':
			v, n, err := unquote(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tokString, v})
			i += n
		default:
			op := ""
			for _, o := range ops3 {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%~()[]{},.:|=<>!", rune(c)) {
					return nil, fmt.Errorf("unexpected character %q", c)
				}
				op = string(c)
			}
			toks = append(toks, token{tokOp, op})
			i += len(op)
		}
	}
	return toks, nil
}

// unquote reads a Python string literal at the start of s: its value and
// length.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n >= len(s)+0 && i+n > len(s)-1 {
				return "", 0, fmt.Errorf("truncated \\%c escape", e)
			}
			var r rune
			for _, h := range s[i+1 : i+1+n] {
				d := strings.IndexRune("0123456789abcdef", unicode.ToLower(h))
				if d < 0 {
					return "", 0, fmt.Errorf("bad \\%c escape", e)
				}
				r = r*16 + rune(d)
			}
			b.WriteRune(r)
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, fmt.Errorf("unterminated string")
}
