package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// preTokenizer splits a normalized section into words for the model.
// section is the index of the section (text between added tokens) in the
// input, which Metaspace's prepend_scheme "first" looks at.
type preTokenizer interface {
	preTokenize(ru *run, words []string, section int) []string
}

// eachWord applies f to every word and concatenates the results.
func eachWord(words []string, f func(string) []string) []string {
	if len(words) == 1 {
		return f(words[0])
	}
	var out []string
	for _, w := range words {
		out = append(out, f(w)...)
	}
	return out
}

func newPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch typ {
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "Sequence":
		var c struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Sequence: %w", err)
		}
		var seq preSequence
		for i, r := range c.PreTokenizers {
			p, err := newPreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("pre_tokenizer Sequence[%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "Whitespace":
		return whitespacePre{}, nil
	case "WhitespaceSplit":
		return whitespaceSplit{}, nil
	case "Metaspace":
		var c struct {
			Replacement   *string `json:"replacement"`
			StrRep        string  `json:"str_rep"`
			PrependScheme *string `json:"prepend_scheme"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: %w", err)
		}
		m := metaspacePre{replacement: "\u2581", scheme: "always"}
		if c.Replacement != nil {
			m.replacement = *c.Replacement
		}
		m.strRep = m.replacement
		if c.StrRep != "" {
			m.strRep = c.StrRep
		}
		if c.PrependScheme != nil {
			m.scheme = *c.PrependScheme
		}
		switch m.scheme {
		case "always", "first", "never":
		default:
			return nil, fmt.Errorf("pre_tokenizer Metaspace: unknown prepend_scheme %q", m.scheme)
		}
		return m, nil
	case "ByteLevel":
		var c struct {
			AddPrefixSpace bool  `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer ByteLevel: %w", err)
		}
		return byteLevelPre{addPrefixSpace: c.AddPrefixSpace, useRegex: c.UseRegex == nil || *c.UseRegex}, nil
	case "Split":
		var c struct {
			Pattern  json.RawMessage `json:"pattern"`
			Behavior string          `json:"behavior"`
			Invert   *bool           `json:"invert"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		// The reference implementation wraps a String pattern in a capture
		// group when invert is explicitly false, and only then.
		capture := c.Invert != nil && !*c.Invert
		p, err := newPattern(c.Pattern, capture)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		s := splitPre{p: p, invert: c.Invert != nil && *c.Invert}
		switch strings.ToLower(c.Behavior) {
		case "removed":
			s.removed = true
		case "isolated", "mergedwithprevious", "mergedwithnext", "contiguous", "":
		default:
			return nil, fmt.Errorf("pre_tokenizer Split: unknown behavior %q", c.Behavior)
		}
		return s, nil
	case "Punctuation":
		return punctuationPre{}, nil
	case "Digits":
		var c struct {
			Individual bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Digits: %w", err)
		}
		return digitsPre{individual: c.Individual}, nil
	case "Replace":
		var c struct {
			Pattern json.RawMessage `json:"pattern"`
			Content string          `json:"content"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Replace: %w", err)
		}
		p, err := newPattern(c.Pattern, false)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Replace: %w", err)
		}
		return replacePre{p: p, content: c.Content}, nil
	}
	return nil, fmt.Errorf("unknown pre_tokenizer type %q", typ)
}

type preSequence []preTokenizer

func (s preSequence) preTokenize(ru *run, words []string, section int) []string {
	for _, p := range s {
		words = p.preTokenize(ru, words, section)
	}
	return words
}

// isBertPunct is the reference PUNCTUATION_REGEX: \p{P} plus the ASCII
// symbol ranges.
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return (r >= 0x21 && r <= 0x2F) || (r >= 0x3A && r <= 0x40) || (r >= 0x5B && r <= 0x60) || (r >= 0x7B && r <= 0x7E)
	}
	return unicode.In(r, unicode.P)
}

// bertPre trims the text, then takes runs of non-space non-punctuation and
// single punctuation characters; whitespace separates.
type bertPre struct{}

func (bertPre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		w = jsTrim(w)
		var out []string
		start := -1
		for i, r := range w {
			switch {
			case isJSSpace(r):
				if start >= 0 {
					out = append(out, w[start:i])
					start = -1
				}
			case isBertPunct(r):
				if start >= 0 {
					out = append(out, w[start:i])
					start = -1
				}
				out = append(out, string(r))
			default:
				if start < 0 {
					start = i
				}
			}
		}
		if start >= 0 {
			out = append(out, w[start:])
		}
		return out
	})
}

// runs groups consecutive characters by class; class 0 separates and is
// dropped. It is the shape of /A+|B+/g over one string.
func runs(w string, class func(rune) int) []string {
	var out []string
	start, cur := -1, 0
	for i, r := range w {
		c := class(r)
		if c != cur || c == 0 {
			if start >= 0 {
				out = append(out, w[start:i])
			}
			start = -1
			if c != 0 {
				start = i
			}
			cur = c
		}
	}
	if start >= 0 {
		out = append(out, w[start:])
	}
	return out
}

func isASCIIWord(r rune) bool {
	return r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}

// whitespacePre is /\w+|[^\w\s]+/g with ASCII \w (no "u" flag).
type whitespacePre struct{}

func (whitespacePre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		return runs(w, func(r rune) int {
			switch {
			case isASCIIWord(r):
				return 1
			case isJSSpace(r):
				return 0
			}
			return 2
		})
	})
}

// whitespaceSplit is /\S+/g.
type whitespaceSplit struct{}

func (whitespaceSplit) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		return runs(w, func(r rune) int {
			if isJSSpace(r) {
				return 0
			}
			return 1
		})
	})
}

// punctuationPre groups runs of punctuation and runs of everything else
// (the configured behavior is not consulted, as in the reference).
type punctuationPre struct{}

func (punctuationPre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		return runs(w, func(r rune) int {
			if isBertPunct(r) {
				return 2
			}
			return 1
		})
	})
}

// digitsPre is /[^\d]+|\d+/gu (or \d alone with individual_digits); \d is
// ASCII 0-9.
type digitsPre struct{ individual bool }

func (d digitsPre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		if !d.individual {
			return runs(w, func(r rune) int {
				if r >= '0' && r <= '9' {
					return 2
				}
				return 1
			})
		}
		var out []string
		start := -1
		for i, r := range w {
			if r >= '0' && r <= '9' {
				if start >= 0 {
					out = append(out, w[start:i])
					start = -1
				}
				out = append(out, w[i:i+1])
			} else if start < 0 {
				start = i
			}
		}
		if start >= 0 {
			out = append(out, w[start:])
		}
		return out
	})
}

// metaspacePre replaces spaces with the replacement and prepends one; it
// does not split on it (the reference ignores "split").
type metaspacePre struct {
	replacement, strRep, scheme string
}

func (m metaspacePre) preTokenize(ru *run, words []string, section int) []string {
	out := make([]string, len(words))
	for i, w := range words {
		w = strings.ReplaceAll(w, " ", m.strRep)
		if !strings.HasPrefix(w, m.replacement) && (m.scheme == "always" || (m.scheme == "first" && section == 0)) {
			w = m.strRep + w
		}
		out[i] = w
	}
	return out
}

// splitPre is the Split pre-tokenizer. invert keeps only the matches;
// removed splits like String.prototype.split; every other behavior
// isolates the matches (the reference treats them all alike).
type splitPre struct {
	p       *pattern
	invert  bool
	removed bool
}

func (s splitPre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		switch {
		case s.invert:
			return s.p.matchOnly(ru, w)
		case s.removed:
			return s.p.split(ru, w)
		}
		return s.p.isolate(ru, w)
	})
}

type replacePre struct {
	p       *pattern
	content string
}

func (r replacePre) preTokenize(ru *run, words []string, _ int) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = r.p.replaceAll(ru, w, r.content)
	}
	return out
}
