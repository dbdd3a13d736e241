package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
)

// Bracket expressions ([...]) of tokenizer.json regexes, rewritten for
// regexp2 with the meaning the reference gives them.

// classOperand collects one [...] body: plain fragments that can sit inside a
// bracket, and set-valued atoms that must be alternated. tail tracks what was
// written last, to tell a range dash from a literal one.
type classOperand struct {
	frag strings.Builder
	alts []string
	tail classTail
}

type classTail int

const (
	tailNone classTail = iota
	tailScalar
	tailSet
	tailRange
	tailCompleteRange
)

func (o *classOperand) scalar(s string) {
	o.frag.WriteString(s)
	if o.tail == tailRange {
		o.tail = tailCompleteRange
		return
	}
	o.tail = tailScalar
}

func (o *classOperand) set(s string) error {
	if o.tail == tailRange {
		return fmt.Errorf("range with a set-valued class operand")
	}
	o.frag.WriteString(s)
	o.tail = tailSet
	return nil
}

func (o *classOperand) alt(s string) error {
	if o.tail == tailRange {
		return fmt.Errorf("range with a set-valued class operand")
	}
	o.alts = append(o.alts, s)
	o.tail = tailSet
	return nil
}

func (o *classOperand) atom() string {
	var pieces []string
	if o.frag.Len() > 0 {
		pieces = append(pieces, "["+o.frag.String()+"]")
	}
	pieces = append(pieces, o.alts...)
	if len(pieces) == 1 {
		return pieces[0]
	}
	return "(?:" + strings.Join(pieces, "|") + ")"
}

// class rewrites the bracket expression starting at src[start]; it returns
// the atom and the index after the closing bracket.
func (t *regexTranslator) class(start int, fold bool) (string, int, error) {
	src := t.src
	i := start + 1
	negated := i < len(src) && src[i] == '^'
	if negated {
		i++
	}
	first := i
	var op classOperand
	for i < len(src) {
		c := src[i]
		switch {
		case c == ']' && i == first:
			op.scalar(`\]`)
			i++
		case c == ']':
			if op.tail == tailNone {
				return "", 0, fmt.Errorf("empty character class")
			}
			return t.finishClass(&op, negated, fold), i + 1, nil
		case c == '[':
			if strings.HasPrefix(string(src[i:]), "[:") {
				return "", 0, fmt.Errorf("POSIX bracket expressions are not supported")
			}
			s, n, err := t.class(i, fold)
			if err != nil {
				return "", 0, err
			}
			if err := op.alt(s); err != nil {
				return "", 0, err
			}
			i = n
		case c == '&' && i+1 < len(src) && src[i+1] == '&':
			return "", 0, fmt.Errorf("character-class intersection is not supported")
		case c == '\\':
			n, err := t.classEscape(i, &op)
			if err != nil {
				return "", 0, err
			}
			i = n
		case c == '-':
			terminal := i+1 < len(src) && src[i+1] == ']'
			switch {
			case op.tail == tailSet && !terminal:
				return "", 0, fmt.Errorf("range with a set-valued class operand")
			case op.tail == tailNone || op.tail == tailRange || op.tail == tailCompleteRange || terminal:
				op.scalar(`\-`)
			default:
				op.frag.WriteByte('-')
				op.tail = tailRange
			}
			i++
		default:
			op.scalar(classLiteral(c))
			i++
		}
	}
	return "", 0, fmt.Errorf("unterminated character class")
}

func (t *regexTranslator) classEscape(i int, op *classOperand) (int, error) {
	src := t.src
	if i+1 >= len(src) {
		return 0, fmt.Errorf("unterminated escape in class")
	}
	next := src[i+1]
	if s, n, ok, err := braced(src[i:]); ok || err != nil {
		if err != nil {
			return 0, err
		}
		if next == 'x' || next == 'u' {
			cp, _ := strconv.ParseUint(s, 16, 32)
			op.scalar(classLiteral(rune(cp)))
			return i + n, nil
		}
		frag, err := propertyClass(s)
		if err != nil {
			return 0, err
		}
		if next == 'P' {
			return i + n, op.alt("[^" + frag + "]")
		}
		return i + n, op.set(frag)
	}
	if cp, n, ok := fixedWidth(src[i:]); ok {
		op.scalar(classLiteral(cp))
		return i + n, nil
	}
	switch next {
	case 'W':
		return i + 2, op.alt(nonWordClass)
	case 'H':
		return i + 2, op.alt(`[^` + hexChars + `]`)
	case 'a', 'e', 'n', 'r', 't', 'f', 'v':
		op.scalar(classEscapes[next])
		return i + 2, nil
	}
	if s, ok := classEscapes[next]; ok {
		return i + 2, op.set(s)
	}
	if unicode.IsLetter(next) || unicode.IsDigit(next) {
		return 0, fmt.Errorf("unsupported class escape \\%c", next)
	}
	op.scalar(classLiteral(next))
	return i + 2, nil
}

func classLiteral(c rune) string {
	if strings.ContainsRune(`\^-[]`, c) {
		return `\` + string(c)
	}
	if c < 0x20 {
		return fmt.Sprintf(`\u%04X`, c)
	}
	return string(c)
}

// finishClass builds the atom for a parsed class, adding the other case of
// ASCII letters when inside (?i:...).
func (t *regexTranslator) finishClass(op *classOperand, negated, fold bool) string {
	if fold {
		if re, err := regexp2.Compile(`^`+op.atom()+`$`, regexp2.None); err == nil {
			re.MatchTimeout = MatchTimeout
			var add strings.Builder
			for c := 'A'; c <= 'Z'; c++ {
				lc := c + 'a' - 'A'
				hasU, _ := re.MatchString(string(c))
				hasL, _ := re.MatchString(string(lc))
				if hasU && !hasL {
					add.WriteRune(lc)
				} else if hasL && !hasU {
					add.WriteRune(c)
				}
			}
			op.frag.WriteString(add.String())
		}
	}
	if len(op.alts) == 0 {
		if negated {
			return "[^" + op.frag.String() + "]"
		}
		return "[" + op.frag.String() + "]"
	}
	if negated {
		return "(?:(?!" + op.atom() + ")" + anyChar + ")"
	}
	return op.atom()
}
