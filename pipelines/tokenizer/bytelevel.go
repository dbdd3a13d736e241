package tokenizer

import (
	"strings"
	"unicode"
)

// byteRunes maps each byte to the printable code point GPT-2's byte-level
// BPE uses for it; runeBytes is the inverse.
var byteRunes, runeBytes = func() ([256]rune, map[rune]byte) {
	var t [256]rune
	inv := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
		inv[t[b]] = byte(b)
	}
	return t, inv
}()

// toByteLevel maps the UTF-8 bytes of s to byte-level characters.
func toByteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteRunes[s[i]])
	}
	return sb.String()
}

// byteLevelPre is the ByteLevel pre-tokenizer: an optional prefix space,
// the GPT-2 split (when use_regex), then the byte-to-character mapping.
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
}

func (b byteLevelPre) preTokenize(ru *run, words []string, _ int) []string {
	return eachWord(words, func(w string) []string {
		if b.addPrefixSpace && !strings.HasPrefix(w, " ") {
			w = " " + w
		}
		pieces := []string{w}
		if b.useRegex {
			pieces = gpt2Split(w)
		}
		for i, p := range pieces {
			pieces[i] = toByteLevel(p)
		}
		return pieces
	})
}

const (
	clsSpace = iota
	clsLetter
	clsNumber
	clsOther
)

func gpt2Class(r rune) int {
	switch {
	case isJSSpace(r):
		return clsSpace
	case r < 0x80:
		switch {
		case (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
			return clsLetter
		case r >= '0' && r <= '9':
			return clsNumber
		}
		return clsOther
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	}
	return clsOther
}

// gpt2Split matches, left to right, the GPT-2 pattern the reference
// ByteLevel pre-tokenizer uses (with ECMAScript \s):
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Every character falls in one alternative, so the matches tile the text.
func gpt2Split(s string) []string {
	r := []rune(s)
	cls := make([]int, len(r))
	for i, c := range r {
		cls[i] = gpt2Class(c)
	}
	runEnd := func(i, c int) int {
		for i < len(r) && cls[i] == c {
			i++
		}
		return i
	}
	var out []string
	for i := 0; i < len(r); {
		end := i
		switch {
		case r[i] == '\'' && contraction(r[i+1:]) > 0:
			end = i + 1 + contraction(r[i+1:])
		case cls[i] == clsLetter || cls[i] == clsNumber || cls[i] == clsOther:
			end = runEnd(i, cls[i])
		case r[i] == ' ' && i+1 < len(r) && cls[i+1] != clsSpace:
			end = runEnd(i+1, cls[i+1])
		default: // whitespace run
			j := runEnd(i, clsSpace)
			end = j
			if j < len(r) && j-1 > i {
				end = j - 1
			}
		}
		out = append(out, string(r[i:end]))
		i = end
	}
	return out
}

// contraction returns the length of 's 't 're 've 'm 'll 'd after the quote.
func contraction(r []rune) int {
	if len(r) == 0 {
		return 0
	}
	switch r[0] {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(r) > 1 && r[1] == 'e' {
			return 2
		}
	case 'l':
		if len(r) > 1 && r[1] == 'l' {
			return 2
		}
	}
	return 0
}
