package engine

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// compileTemplate compiles a chat template with its Jinja comments removed
// first: the Jinja library's scanner reads quotes inside {# ... #} as string
// delimiters (an apostrophe in a comment leaves the comment unclosed), which
// Jinja does not.
func compileTemplate(src string) (*jinja.Template, error) {
	stripped, err := stripJinjaComments(src)
	if err != nil {
		return nil, err
	}
	return jinja.Compile(stripped)
}

// stripJinjaComments removes the {# ... #} comments of a Jinja template the
// way Jinja's lexer finds them: only in template text, where the first of
// {{, {% and {# opens a tag; a comment runs to the first #} whatever it
// holds; {{ ... }} and {% ... %} run to their closer outside string literals
// and balanced brackets (so {# inside them is no comment), and
// {% raw %} ... {% endraw %} is copied as it is. {#- trims the whitespace
// before the comment and -#} the whitespace after it, as for other tags.
// An unterminated comment is an error.
func stripJinjaComments(src string) (string, error) {
	if !strings.Contains(src, "{#") {
		return src, nil
	}
	var out strings.Builder
	out.Grow(len(src))
	i := 0
	for i < len(src) {
		j := nextTag(src, i)
		if j < 0 {
			out.WriteString(src[i:])
			break
		}
		out.WriteString(src[i:j])
		switch src[j+1] {
		case '#':
			body := j + 2
			trimLeft := body < len(src) && src[body] == '-'
			end := strings.Index(src[body:], "#}")
			if end < 0 {
				return "", fmt.Errorf("unclosed comment at line %d", 1+strings.Count(src[:j], "\n"))
			}
			end += body
			i = end + 2
			if trimLeft {
				s := strings.TrimRightFunc(out.String(), unicode.IsSpace)
				out.Reset()
				out.WriteString(s)
			}
			if end > body && src[end-1] == '-' && (!trimLeft || end-1 > body) {
				i += len(src[i:]) - len(strings.TrimLeftFunc(src[i:], unicode.IsSpace))
			}
			// Text ending in "{" must not meet a following "{", "%" or
			// "#" and open a tag the comment kept apart.
			if s := out.String(); strings.HasSuffix(s, "{") && i < len(src) && strings.IndexByte("{%#", src[i]) >= 0 {
				out.Reset()
				out.WriteString(s[:len(s)-1])
				out.WriteString(`{{ "{" }}`)
			}
		default:
			end, err := tagEnd(src, j)
			if err != nil {
				return "", err
			}
			if src[j+1] == '%' && isRawTag(src[j:end]) {
				k := rawEnd(src, end)
				if k < 0 {
					return "", fmt.Errorf("unclosed raw block at line %d", 1+strings.Count(src[:j], "\n"))
				}
				end = k
			}
			out.WriteString(src[j:end])
			i = end
		}
	}
	return out.String(), nil
}

// nextTag is the index of the first "{{", "{%" or "{#" at or after i, or -1.
func nextTag(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return -1
		}
		i += k
		if c := src[i+1]; c == '{' || c == '%' || c == '#' {
			return i
		}
		i++
	}
}

// tagEnd is the index just past the closer of the {{ or {% tag at j:
// the first "}}" or "%}" outside string literals and with the brackets
// opened in the tag closed again.
func tagEnd(src string, j int) (int, error) {
	closer := byte('}')
	if src[j+1] == '%' {
		closer = '%'
	}
	depth := 0
	for i := j + 2; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']':
			depth--
		case '}', '%':
			if depth <= 0 && c == closer && i+1 < len(src) && src[i+1] == '}' {
				return i + 2, nil
			}
			if c == '}' {
				depth--
			}
		}
	}
	// Unclosed: copy the rest and let the library report it.
	return len(src), nil
}

// isRawTag reports whether tag is {% raw %} (with optional - or +).
func isRawTag(tag string) bool {
	t := strings.TrimSuffix(strings.TrimPrefix(tag, "{%"), "%}")
	t = strings.TrimSpace(strings.Trim(t, "-+"))
	return t == "raw"
}

// rawEnd is the index just past the {% endraw %} closing a raw block whose
// body starts at i, or -1.
func rawEnd(src string, i int) int {
	for {
		k := strings.Index(src[i:], "{%")
		if k < 0 {
			return -1
		}
		i += k
		e := strings.Index(src[i:], "%}")
		if e < 0 {
			return -1
		}
		t := strings.TrimSpace(strings.Trim(src[i+2:i+e], "-+"))
		if t == "endraw" {
			return i + e + 2
		}
		i += 2
	}
}
