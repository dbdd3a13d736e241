package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// tokenizer.json regexes are written for Oniguruma (the Rust tokenizers
// crate). The reference implementation rewrites them into JavaScript regexes
// and runs them with the "u" flag; this file rewrites them into regexp2
// syntax with the same meaning, so that both engines agree:
//   - \s is Unicode White_Space, \d is \p{Nd}, \w is Alphabetic+M+Nd+Pc, \h is hex;
//   - (?i:...) folds ASCII letters only;
//   - atomic groups and possessive quantifiers become plain greedy ones;
//   - X{n,m}+ and X{n,m}* repeat the bounded repetition;
//   - . excludes only \n, ^ and $ are line anchors.

const (
	wordChars    = `\p{L}\p{Nl}\p{Other_Alphabetic}\p{M}\p{Nd}\p{Pc}`
	wordClass    = `[` + wordChars + `]`
	nonWordClass = `[^` + wordChars + `]`
	hexChars     = `0-9A-Fa-f`
	anyChar      = `[\s\S]`
)

var escapeRewrites = map[rune]string{
	'A': `\A`,
	'z': `\z`,
	'Z': `(?=\n?\z)`,
	'h': `[` + hexChars + `]`,
	'H': `[^` + hexChars + `]`,
	'w': wordClass,
	'W': nonWordClass,
	'd': `\p{Nd}`,
	'D': `\P{Nd}`,
	's': `\p{White_Space}`,
	'S': `\P{White_Space}`,
	'b': `(?:(?<!` + wordClass + `)(?=` + wordClass + `)|(?<=` + wordClass + `)(?!` + wordClass + `))`,
	'B': `(?:(?<!` + wordClass + `)(?!` + wordClass + `)|(?<=` + wordClass + `)(?=` + wordClass + `))`,
	'a': `\x07`,
	'e': `\x1B`,
	'n': `\n`,
	'r': `\r`,
	't': `\t`,
	'f': `\f`,
	'v': `\v`,
}

// classEscapes are the set escapes allowed inside [...] (fragment form).
var classEscapes = map[rune]string{
	'h': hexChars,
	'w': wordChars,
	'd': `\p{Nd}`,
	'D': `\P{Nd}`,
	's': `\p{White_Space}`,
	'S': `\P{White_Space}`,
	'a': `\x07`,
	'e': `\x1B`,
	'n': `\n`,
	'r': `\r`,
	't': `\t`,
	'f': `\f`,
	'v': `\v`,
}

// propertyClass maps a \p{...} name to a class fragment regexp2 understands.
func propertyClass(name string) (string, error) {
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "Word":
		return wordChars, nil
	case "Alphabetic", "Alpha":
		return `\p{L}\p{Nl}\p{Other_Alphabetic}`, nil
	case "Lowercase", "Lower":
		return `\p{Ll}\p{Other_Lowercase}`, nil
	case "Uppercase", "Upper":
		return `\p{Lu}\p{Other_Uppercase}`, nil
	case "Letter":
		name = "L"
	case "Number":
		name = "N"
	case "Punctuation":
		name = "P"
	case "Symbol":
		name = "S"
	case "Mark":
		name = "M"
	case "Separator":
		name = "Z"
	case "Other":
		name = "C"
	case "White_Space", "space":
		name = "White_Space"
	}
	if unicode.Categories[name] != nil || unicode.Scripts[name] != nil || unicode.Properties[name] != nil {
		return `\p{` + name + `}`, nil
	}
	return "", fmt.Errorf("unsupported Unicode property %q", name)
}

type regexTranslator struct {
	src []rune
	out strings.Builder
}

// translateRegex rewrites an Oniguruma pattern from tokenizer.json into
// regexp2 syntax.
func translateRegex(pattern string) (string, error) {
	t := &regexTranslator{src: []rune(pattern)}
	if err := t.run(); err != nil {
		return "", fmt.Errorf("regex %q: %w", clipPattern(pattern), err)
	}
	return t.out.String(), nil
}

// compileRegex translates and compiles a tokenizer.json regex of at most
// MaxPatternRunes characters and MaxPatternDepth nested groups; matches of
// the result time out after MatchTimeout.
func compileRegex(pattern string) (*regexp2.Regexp, error) {
	if n := len([]rune(pattern)); n > MaxPatternRunes {
		return nil, fmt.Errorf("regex %q: %d characters (limit %d)", clipPattern(pattern), n, MaxPatternRunes)
	}
	tr, err := translateRegex(pattern)
	if err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(tr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", clipPattern(pattern), err)
	}
	re.MatchTimeout = MatchTimeout
	return re, nil
}

func (t *regexTranslator) run() error {
	atomStart := -1
	lastQuant := false
	fold := false
	type group struct {
		start int
		fold  bool
	}
	var groups []group
	emit := func(s string) {
		atomStart = t.out.Len()
		t.out.WriteString(s)
		lastQuant = false
	}
	src := t.src
	for i := 0; i < len(src); {
		c := src[i]
		switch c {
		case '\\':
			s, n, err := t.escape(i, fold)
			if err != nil {
				return err
			}
			i += n
			if s != "" {
				emit(s)
			}
		case '[':
			s, n, err := t.class(i, fold)
			if err != nil {
				return err
			}
			emit(s)
			i = n
		case ']':
			emit(`\]`)
			i++
		case '.':
			emit(`[^\n]`)
			i++
		case '^':
			emit(`(?:\A|(?<=\n))`)
			i++
		case '$':
			emit(`(?=\n|\z)`)
			i++
		case '(':
			prefix, outPrefix, foldNext := t.groupPrefix(i, fold)
			if len(groups) == MaxPatternDepth {
				return fmt.Errorf("groups nested more than %d deep", MaxPatternDepth)
			}
			groups = append(groups, group{t.out.Len(), fold})
			fold = foldNext
			t.out.WriteString(outPrefix)
			lastQuant = false
			i += len([]rune(prefix))
		case ')':
			t.out.WriteByte(')')
			if len(groups) > 0 {
				g := groups[len(groups)-1]
				groups = groups[:len(groups)-1]
				atomStart, fold = g.start, g.fold
			} else {
				atomStart, fold = -1, false
			}
			lastQuant = false
			i++
		case '|':
			t.out.WriteByte('|')
			atomStart = -1
			lastQuant = false
			i++
		case '{':
			body, n, ok := braceQuantifier(src[i:])
			if !ok || atomStart < 0 {
				emit(`\{`)
				i++
				continue
			}
			i += n
			if i < len(src) && (src[i] == '+' || src[i] == '*') {
				cur := t.out.String()
				t.out.Reset()
				t.out.WriteString(cur[:atomStart] + "(?:" + cur[atomStart:] + "{" + body + "})" + string(src[i]))
				i++
			} else {
				t.out.WriteString("{" + body + "}")
			}
			lastQuant = true
		case '}':
			emit(`\}`)
			i++
		case '+':
			if !lastQuant {
				t.out.WriteByte('+')
				lastQuant = true
			}
			i++
		case '*', '?':
			t.out.WriteRune(c)
			lastQuant = true
			i++
		default:
			emit(literal(c, fold))
			i++
		}
	}
	return nil
}

// groupPrefix reads the group opener at src[i]: it returns the source text,
// what to write, and the ASCII-fold state inside the group.
func (t *regexTranslator) groupPrefix(i int, fold bool) (string, string, bool) {
	rest := string(t.src[i:])
	switch {
	case strings.HasPrefix(rest, "(?i:"):
		return "(?i:", "(?:", true
	case strings.HasPrefix(rest, "(?>"):
		return "(?>", "(?:", fold
	case strings.HasPrefix(rest, "(?<=") || strings.HasPrefix(rest, "(?<!"):
		return rest[:4], rest[:4], fold
	case strings.HasPrefix(rest, "(?:") || strings.HasPrefix(rest, "(?=") || strings.HasPrefix(rest, "(?!"):
		return rest[:3], rest[:3], fold
	case strings.HasPrefix(rest, "(?<"):
		if j := strings.IndexByte(rest, '>'); j > 3 {
			return rest[:j+1], rest[:j+1], fold
		}
	}
	return "(", "(", fold
}

// braceQuantifier parses {n}, {n,}, {n,m} or {,m} at the start of r.
func braceQuantifier(r []rune) (string, int, bool) {
	j := 1
	for j < len(r) && r[j] != '}' {
		if !(r[j] >= '0' && r[j] <= '9') && r[j] != ',' {
			return "", 0, false
		}
		j++
	}
	if j >= len(r) || j == 1 {
		return "", 0, false
	}
	body := string(r[1:j])
	parts := strings.Split(body, ",")
	if len(parts) > 2 || (len(parts) == 2 && parts[0] == "" && parts[1] == "") {
		return "", 0, false
	}
	if parts[0] == "" {
		body = "0" + body
	}
	return body, j + 1, true
}

// literal writes one literal code point, escaped for regexp2.
func literal(c rune, fold bool) string {
	if fold && c < utf8.RuneSelf && unicode.IsLetter(c) {
		return "[" + strings.ToLower(string(c)) + strings.ToUpper(string(c)) + "]"
	}
	if strings.ContainsRune(`\^$.|?*+()[]{}`, c) {
		return `\` + string(c)
	}
	if c == '#' || c == ' ' || c < 0x20 {
		return fmt.Sprintf(`\u%04X`, c)
	}
	return string(c)
}

// escape rewrites the escape starting at src[i] outside a class.
func (t *regexTranslator) escape(i int, fold bool) (string, int, error) {
	src := t.src
	if i+1 >= len(src) {
		return `\\`, 1, nil
	}
	next := src[i+1]
	if s, n, ok, err := braced(src[i:]); ok || err != nil {
		if err != nil {
			return "", 0, err
		}
		if next == 'x' || next == 'u' {
			cp, _ := strconv.ParseUint(s, 16, 32)
			return literal(rune(cp), fold), n, nil
		}
		frag, err := propertyClass(s)
		if err != nil {
			return "", 0, err
		}
		if next == 'P' {
			return "[^" + frag + "]", n, nil
		}
		return "[" + frag + "]", n, nil
	}
	if cp, n, ok := fixedWidth(src[i:]); ok {
		if n == 3 && next == 'c' {
			return string(src[i : i+n]), n, nil
		}
		return literal(cp, fold), n, nil
	}
	if next == 'G' {
		return "", 2, nil
	}
	if s, ok := escapeRewrites[next]; ok {
		return s, 2, nil
	}
	if next >= '1' && next <= '9' {
		return `\` + string(next), 2, nil
	}
	if unicode.IsLetter(next) || unicode.IsDigit(next) {
		return "", 0, fmt.Errorf("unsupported escape \\%c", next)
	}
	return literal(next, false), 2, nil
}

// braced parses \p{..}, \P{..}, \x{..} and \u{..}.
func braced(r []rune) (string, int, bool, error) {
	if len(r) < 4 || r[2] != '{' || !strings.ContainsRune("pPxu", r[1]) {
		return "", 0, false, nil
	}
	end := -1
	for j := 3; j < len(r); j++ {
		if r[j] == '}' {
			end = j
			break
		}
	}
	if end < 0 {
		return "", 0, false, fmt.Errorf("unterminated \\%c{", r[1])
	}
	body := string(r[3:end])
	if r[1] == 'x' || r[1] == 'u' {
		if _, err := strconv.ParseUint(body, 16, 32); err != nil {
			return "", 0, false, fmt.Errorf("bad \\%c{%s}", r[1], body)
		}
	}
	return body, end + 1, true, nil
}

// fixedWidth parses \xHH, \uHHHH and \cX.
func fixedWidth(r []rune) (rune, int, bool) {
	hex := func(n int) (rune, bool) {
		if len(r) < 2+n {
			return 0, false
		}
		v, err := strconv.ParseUint(string(r[2:2+n]), 16, 32)
		return rune(v), err == nil
	}
	switch r[1] {
	case 'x':
		if v, ok := hex(2); ok {
			return v, 4, true
		}
	case 'u':
		if v, ok := hex(4); ok {
			return v, 6, true
		}
	case 'c':
		if len(r) >= 3 && r[2] < utf8.RuneSelf && unicode.IsLetter(r[2]) {
			return r[2] % 32, 3, true
		}
	}
	return 0, 0, false
}
