package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
)

// pattern is a tokenizer.json {"String": ...} or {"Regex": ...} pattern,
// compiled once.
type pattern struct {
	re  *regexp2.Regexp
	src string // as written in tokenizer.json, for errors
	// literal is set for String patterns; replace uses it directly.
	literal string
	isLit   bool
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// newPattern compiles a pattern. capture wraps a String pattern in a capture
// group, as the reference implementation does for Split with invert=false
// (which makes a "Removed" split keep the delimiters).
func newPattern(raw json.RawMessage, capture bool) (*pattern, error) {
	var pj patternJSON
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("missing pattern")
	}
	if err := json.Unmarshal(raw, &pj); err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	switch {
	case pj.Regex != nil:
		re, err := compileRegex(*pj.Regex)
		if err != nil {
			return nil, err
		}
		return &pattern{re: re, src: *pj.Regex}, nil
	case pj.String != nil:
		if n := len([]rune(*pj.String)); n > MaxPatternRunes {
			return nil, fmt.Errorf("string pattern of %d characters (limit %d)", n, MaxPatternRunes)
		}
		expr := regexp2.Escape(*pj.String)
		if capture {
			expr = "(" + expr + ")"
		}
		re, err := regexp2.Compile(expr, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", clipPattern(*pj.String), err)
		}
		re.MatchTimeout = MatchTimeout
		return &pattern{re: re, src: *pj.String, literal: *pj.String, isLit: true}, nil
	}
	return nil, fmt.Errorf("pattern needs String or Regex: %s", raw)
}

// match is one regex match as rune offsets, with its capture groups.
type match struct {
	start, end int
	groups     []string // capture groups 1..n; "" when a group did not take part
}

// findAll returns every match in r, left to right, as String.prototype.matchAll
// with the "gu" flags would. It checks ru's context between matches, ends
// ru with a *RegexTimeoutError when one match runs past MatchTimeout, and
// with a *RegexBudgetError when the request's regex budget is spent.
func (p *pattern) findAll(ru *run, r []rune, withGroups bool) []match {
	var out []match
	ru.check()
	start := time.Now()
	m, err := p.re.FindRunesMatch(r)
	for m != nil && err == nil {
		ru.regexTime(start, p.src)
		mm := match{start: m.Index, end: m.Index + m.Length}
		if withGroups {
			for _, g := range m.Groups()[1:] {
				mm.groups = append(mm.groups, g.String())
			}
		}
		out = append(out, mm)
		ru.tick(1)
		start = time.Now()
		m, err = p.re.FindNextMatch(m)
	}
	if err != nil {
		// regexp2 fails only on a timeout; its message holds the whole text.
		ru.fail(&RegexTimeoutError{Pattern: clipPattern(p.src), Runes: len(r)})
	}
	ru.regexTime(start, p.src) // the last call, which found no match
	return out
}

// matchOnly keeps the non-empty matches (String.prototype.match with "g").
func (p *pattern) matchOnly(ru *run, s string) []string {
	r := []rune(s)
	var out []string
	for _, m := range p.findAll(ru, r, false) {
		if m.end > m.start {
			out = append(out, string(r[m.start:m.end]))
		}
	}
	return out
}

// isolate splits s into the matches and the text between them, dropping
// empty pieces.
func (p *pattern) isolate(ru *run, s string) []string {
	r := []rune(s)
	var out []string
	prev := 0
	for _, m := range p.findAll(ru, r, false) {
		if prev < m.start {
			out = append(out, string(r[prev:m.start]))
		}
		if m.end > m.start {
			out = append(out, string(r[m.start:m.end]))
		}
		prev = m.end
	}
	if prev < len(r) {
		out = append(out, string(r[prev:]))
	}
	return out
}

// split is String.prototype.split(regex) followed by dropping empty pieces:
// the text between matches plus each match's capture groups.
func (p *pattern) split(ru *run, s string) []string {
	r := []rune(s)
	var out []string
	add := func(x string) {
		if x != "" {
			out = append(out, x)
		}
	}
	prev := 0
	for _, m := range p.findAll(ru, r, true) {
		if m.start >= len(r) {
			break
		}
		if m.end == prev && m.start == m.end {
			continue // an empty match where the previous piece ended
		}
		add(string(r[prev:m.start]))
		for _, g := range m.groups {
			add(g)
		}
		prev = m.end
	}
	add(string(r[prev:]))
	return out
}

// replaceAll is String.prototype.replaceAll(pattern, content). A match that
// runs past MatchTimeout ends ru with a *RegexTimeoutError; with no run (the
// decoders) the text is returned unchanged.
func (p *pattern) replaceAll(ru *run, s, content string) string {
	if p.isLit {
		return strings.ReplaceAll(s, p.literal, content)
	}
	ru.check()
	start := time.Now()
	out, err := p.re.Replace(s, content, -1, -1)
	if err != nil {
		if ru != nil {
			ru.fail(&RegexTimeoutError{Pattern: clipPattern(p.src), Runes: len([]rune(s))})
		}
		return s
	}
	ru.regexTime(start, p.src)
	return out
}
