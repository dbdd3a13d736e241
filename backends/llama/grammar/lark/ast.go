package lark

import (
	"fmt"
	"slices"
	"unicode"
)

// expr is an expansion of a rule or terminal.
type expr interface{ isExpr() }

type (
	alt []expr // one of
	seq []expr // each in turn; empty matches ""
	// rep is x repeated min..max times (max < 0: unbounded).
	rep struct {
		x        expr
		min, max int
	}
	// ref names a rule (lowercase) or a terminal (uppercase).
	ref struct{ name string }
	// lit is a string literal; fold matches ASCII letters in either case.
	lit struct {
		s    string
		fold bool
	}
	// chars is one character of a set.
	chars struct{ set charSet }
	// regex is a /.../ terminal: its source (as written) and its tree.
	regex struct {
		src, flags string
		tree       expr
	}
)

func (alt) isExpr()   {}
func (seq) isExpr()   {}
func (rep) isExpr()   {}
func (ref) isExpr()   {}
func (lit) isExpr()   {}
func (chars) isExpr() {}
func (regex) isExpr() {}

// charSet is a set of code points: sorted, disjoint, non-adjacent ranges.
type charSet []runeRange

type runeRange struct{ lo, hi rune }

// normalize sorts and merges the ranges.
func (s charSet) normalize() charSet {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var m charSet
	for _, r := range out {
		if n := len(m); n > 0 && r.lo <= m[n-1].hi+1 {
			m[n-1].hi = max(m[n-1].hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	return m
}

// complement is every code point not in s (s normalized).
func (s charSet) complement() charSet {
	var out charSet
	next := rune(0)
	for _, r := range s {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, runeRange{next, unicode.MaxRune})
	}
	return out
}

// intersect is the code points in both (both normalized).
func (s charSet) intersect(t charSet) charSet {
	var out charSet
	for _, a := range s {
		for _, b := range t {
			lo, hi := max(a.lo, b.lo), min(a.hi, b.hi)
			if lo <= hi {
				out = append(out, runeRange{lo, hi})
			}
		}
	}
	return out.normalize()
}

// minus is the code points of s not in t.
func (s charSet) minus(t charSet) charSet { return s.intersect(t.normalize().complement()) }

// folded adds the other case of every ASCII letter in s.
func (s charSet) folded() charSet {
	out := slices.Clone(s)
	for _, r := range s {
		for c := max(r.lo, 'A'); c <= min(r.hi, 'Z'); c++ {
			out = append(out, runeRange{c + 32, c + 32})
		}
		for c := max(r.lo, 'a'); c <= min(r.hi, 'z'); c++ {
			out = append(out, runeRange{c - 32, c - 32})
		}
	}
	return out.normalize()
}

func single(r rune) charSet { return charSet{{r, r}} }

// UnsupportedError is a construct of the grammar that the translation
// cannot honour: Construct names it, Where says where it stands.
type UnsupportedError struct {
	Construct string
	Where     string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("lark: %s is not supported (%s)", e.Construct, e.Where)
}

// SyntaxError is grammar text that is not Lark.
type SyntaxError struct {
	Line   int
	Reason string
}

func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("lark: line %d: %s", e.Line, e.Reason)
	}
	return "lark: " + e.Reason
}
