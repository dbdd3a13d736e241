package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a text section before pre-tokenization.
type normalizer interface {
	normalize(ru *run, s string) string
}

type typed struct {
	Type string `json:"type"`
}

func componentType(raw json.RawMessage) (string, error) {
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", err
	}
	return t.Type, nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// newNormalizer builds the normalizer described by raw; nil raw means none.
func newNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	switch typ {
	case "BertNormalizer":
		var c struct {
			CleanText          bool  `json:"clean_text"`
			HandleChineseChars bool  `json:"handle_chinese_chars"`
			StripAccents       *bool `json:"strip_accents"`
			Lowercase          bool  `json:"lowercase"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("BertNormalizer: %w", err)
		}
		n := &bertNormalizer{clean: c.CleanText, chinese: c.HandleChineseChars, lower: c.Lowercase}
		// strip_accents: null follows lowercase; an explicit value wins.
		n.strip = c.Lowercase
		if c.StripAccents != nil {
			n.strip = *c.StripAccents
		}
		return n, nil
	case "Precompiled":
		return precompiled{}, nil
	case "Sequence":
		var c struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("normalizer Sequence: %w", err)
		}
		var seq normSequence
		for i, r := range c.Normalizers {
			n, err := newNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("normalizer Sequence[%d]: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	case "Replace":
		var c struct {
			Pattern json.RawMessage `json:"pattern"`
			Content string          `json:"content"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("normalizer Replace: %w", err)
		}
		p, err := newPattern(c.Pattern, false)
		if err != nil {
			return nil, fmt.Errorf("normalizer Replace: %w", err)
		}
		return replaceNorm{p: p, content: c.Content}, nil
	case "NFC":
		return unicodeNorm{norm.NFC}, nil
	case "NFD":
		return unicodeNorm{norm.NFD}, nil
	case "NFKC":
		return unicodeNorm{norm.NFKC}, nil
	case "NFKD":
		return unicodeNorm{norm.NFKD}, nil
	case "Strip":
		var c struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("normalizer Strip: %w", err)
		}
		return stripNorm{left: c.Left, right: c.Right}, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Prepend":
		var c struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("normalizer Prepend: %w", err)
		}
		return prepend(c.Prepend), nil
	}
	return nil, fmt.Errorf("unknown normalizer type %q", typ)
}

type normSequence []normalizer

func (s normSequence) normalize(ru *run, x string) string {
	for _, n := range s {
		x = n.normalize(ru, x)
	}
	return x
}

type bertNormalizer struct {
	clean, chinese, lower, strip bool
}

// isChineseBMP is the CJK test of the reference BertNormalizer. It looks at
// UTF-16 code units, so only the BMP blocks can ever match: characters of
// CJK Extension B and later (surrogate pairs) are not padded with spaces.
func isChineseBMP(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0xF900 && r <= 0xFAFF)
}

func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if r < 0x80 {
		return r < 0x20 || r == 0x7F
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func (b *bertNormalizer) normalize(ru *run, s string) string {
	if b.clean {
		var sb strings.Builder
		sb.Grow(len(s))
		for _, r := range s {
			switch {
			case r == 0 || r == utf8.RuneError || isBertControl(r):
			case isJSSpace(r):
				sb.WriteByte(' ')
			default:
				sb.WriteRune(r)
			}
		}
		s = sb.String()
	}
	if b.chinese {
		var sb strings.Builder
		sb.Grow(len(s) + 16)
		for _, r := range s {
			if isChineseBMP(r) {
				sb.WriteByte(' ')
				sb.WriteRune(r)
				sb.WriteByte(' ')
			} else {
				sb.WriteRune(r)
			}
		}
		s = sb.String()
	}
	if b.lower {
		s = jsLower(s)
	}
	if b.strip {
		s = removeMarks(norm.NFD.String(s), true)
	}
	return s
}

// precompiled stands in for SentencePiece's precompiled character map the way
// the reference implementation does: it does not read the map; it removes
// control characters, maps odd spaces to " " and applies NFKC (outside
// runs split at U+FF5E, which NFKC would otherwise turn into "~").
type precompiled struct{}

func (precompiled) normalize(ru *run, s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case (r >= 0x01 && r <= 0x08) || r == 0x0B || (r >= 0x0E && r <= 0x1F) || r == 0x7F || r == 0x8F || r == 0x9F:
			return -1
		case r == 0x09 || r == 0x0A || r == 0x0C || r == 0x0D || r == 0xA0 || r == 0x1680 ||
			(r >= 0x2000 && r <= 0x200F) || r == 0x2028 || r == 0x2029 || r == 0x202F ||
			r == 0x205F || r == 0x2581 || r == 0x3000 || r == 0xFEFF || r == 0xFFFD:
			return ' '
		}
		return r
	}, s)
	if !strings.ContainsRune(s, 0xFF5E) {
		return norm.NFKC.String(s)
	}
	parts := strings.Split(s, "\uFF5E")
	for i, p := range parts {
		parts[i] = norm.NFKC.String(p)
	}
	return strings.Join(parts, "\uFF5E")
}

type replaceNorm struct {
	p       *pattern
	content string
}

func (r replaceNorm) normalize(ru *run, s string) string { return r.p.replaceAll(ru, s, r.content) }

type unicodeNorm struct{ f norm.Form }

func (u unicodeNorm) normalize(ru *run, s string) string { return u.f.String(s) }

type stripNorm struct{ left, right bool }

func (n stripNorm) normalize(ru *run, s string) string {
	if n.left {
		s = jsTrimStart(s)
	}
	if n.right {
		s = jsTrimEnd(s)
	}
	return s
}

// stripAccents removes every combining mark (category M) without first
// decomposing, as the reference StripAccents normalizer does.
type stripAccents struct{}

func (stripAccents) normalize(ru *run, s string) string { return removeMarks(s, false) }

type lowercase struct{}

func (lowercase) normalize(ru *run, s string) string { return jsLower(s) }

type prepend string

func (p prepend) normalize(ru *run, s string) string { return string(p) + s }
