// Package utf8text is modeld's one rule for turning the bytes a model
// generates into text. A character whose bytes are split across tokens is
// held until it is complete (or can no longer become valid), and every
// byte that does not begin a valid UTF-8 encoding becomes U+FFFD, one
// replacement per byte — overlong forms, encoded surrogates, bytes over
// U+10FFFF and stray continuation bytes alike. That is the rule
// encoding/json and internal/jsonstr apply, so text that crosses the
// runner's wire as JSON is not changed a second time, and it does not
// depend on where a sequence was cut: the text assembled token by token
// (Assembler) equals Valid of the whole output, byte for byte.
//
// It owns this rule only: stop strings, reasoning blocks and tool calls
// are the engine's and package toolcall's, which work on its output.
package utf8text

import "unicode/utf8"

// Valid is b as text: each byte that does not begin a valid UTF-8
// encoding is replaced by U+FFFD.
func Valid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(AppendValid(make([]byte, 0, len(b)+8), b))
}

// ValidString is Valid for a string.
func ValidString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(AppendValid(make([]byte, 0, len(s)+8), []byte(s)))
}

// AppendValid appends Valid(b) to dst.
func AppendValid(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return dst
}

// IncompleteTail is the number of trailing bytes of b that begin a UTF-8
// sequence that more bytes could still complete: 0 when b ends on a whole
// character or on bytes that no continuation makes valid.
func IncompleteTail(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// Assembler turns pieces of output (a token's bytes each) into text as
// they come: Push returns the text that is decided, holding an incomplete
// character back; Flush returns the rest at the end. The concatenation of
// everything it returns is Valid of the concatenated pieces. The zero
// value is ready.
type Assembler struct {
	pending []byte
}

// Push adds a piece and returns the text it completes.
func (a *Assembler) Push(piece string) string {
	a.pending = append(a.pending, piece...)
	n := len(a.pending) - IncompleteTail(a.pending)
	out := Valid(a.pending[:n])
	a.pending = append(a.pending[:0], a.pending[n:]...)
	return out
}

// Flush returns what is held (an incomplete character becomes U+FFFD per
// byte) and empties the assembler.
func (a *Assembler) Flush() string {
	out := Valid(a.pending)
	a.pending = a.pending[:0]
	return out
}
