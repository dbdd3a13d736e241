package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// This file holds the string primitives whose JavaScript behaviour the
// reference implementation relies on: String.prototype.toLowerCase, trim,
// the ECMAScript \s class and the WHATWG UTF-8 decoder.

// isJSSpace reports whether r is in ECMAScript's \s class (WhiteSpace and
// LineTerminator): unlike Unicode White_Space it includes U+FEFF and excludes
// U+0085.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// jsTrim, jsTrimStart and jsTrimEnd are String.prototype.trim and friends.
func jsTrim(s string) string      { return strings.TrimFunc(s, isJSSpace) }
func jsTrimStart(s string) string { return strings.TrimLeftFunc(s, isJSSpace) }
func jsTrimEnd(s string) string   { return strings.TrimRightFunc(s, isJSSpace) }

// jsLower is String.prototype.toLowerCase: full Unicode lower-case mapping
// with the final-sigma rule, independent of locale. x/text's root-locale
// Lower implements the same mapping (checked code point by code point against
// V8 for every character assigned in Unicode 15.0).
func jsLower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return cases.Lower(language.Und).String(s)
		}
	}
	return s
}

// removeMarks deletes every code point of general category M (or only Mn).
func removeMarks(s string, onlyMn bool) string {
	table := unicode.M
	if onlyMn {
		table = unicode.Mn
	}
	return strings.Map(func(r rune) rune {
		if unicode.Is(table, r) {
			return -1
		}
		return r
	}, s)
}

// decodeUTF8 decodes b as the WHATWG TextDecoder does with fatal=false: each
// maximal ill-formed subpart becomes one U+FFFD. A leading byte-order mark is
// dropped unless keepBOM is set.
func decodeUTF8(b []byte, keepBOM bool) string {
	if !keepBOM && len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			sb.WriteRune(r)
			i += size
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return sb.String()
}

// maximalSubpart returns the length of the ill-formed prefix of b that the
// WHATWG decoder replaces with a single U+FFFD (at least 1).
func maximalSubpart(b []byte) int {
	lead := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 1
	case lead >= 0xE0 && lead <= 0xEF:
		need = 2
		if lead == 0xE0 {
			lo = 0xA0
		} else if lead == 0xED {
			hi = 0x9F
		}
	case lead >= 0xF0 && lead <= 0xF4:
		need = 3
		if lead == 0xF0 {
			lo = 0x90
		} else if lead == 0xF4 {
			hi = 0x8F
		}
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		c := b[n]
		if c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// utf16Len is the length of s in UTF-16 code units (JavaScript's .length).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
