package engine

import (
	"bytes"

	"github.com/modeld/modeld/internal/utf8text"
)

// textAssembler turns token pieces into the text a client may see. It holds
// back (a) a tail that could be the start of a stop string and (b) an
// incomplete UTF-8 sequence, so a stop string is never emitted, even when it
// arrives split across tokens, and emitted text never ends inside a
// character. Bytes that are not UTF-8 become U+FFFD, one per byte
// (internal/utf8text), however the tokens split them.
type textAssembler struct {
	stops   [][]byte
	pending []byte
	matched string // the stop string that matched, once one has
}

func newTextAssembler(stops []string) *textAssembler {
	a := &textAssembler{}
	for _, s := range stops {
		if s != "" {
			a.stops = append(a.stops, []byte(s))
		}
	}
	return a
}

// push adds a token's piece. It returns the text that can be released now
// and whether a stop string matched; after a match the text from the stop
// string on is dropped and the assembler must not be used again.
func (a *textAssembler) push(piece string) (string, bool) {
	a.pending = append(a.pending, piece...)
	if at, i := a.firstStop(); at >= 0 {
		a.matched = string(a.stops[i])
		out := sanitize(a.pending[:at])
		a.pending = nil
		return out, true
	}
	hold := max(a.stopPrefixHold(), utf8text.IncompleteTail(a.pending))
	n := len(a.pending) - hold
	out := sanitize(a.pending[:n])
	a.pending = append(a.pending[:0], a.pending[n:]...)
	return out, false
}

// flush releases everything held (the generation ended without a stop
// string matching).
func (a *textAssembler) flush() string {
	out := sanitize(a.pending)
	a.pending = nil
	return out
}

// firstStop is the earliest offset in pending where a stop string starts
// and which of the stops starts there (the first of them given), or -1.
func (a *textAssembler) firstStop() (at, which int) {
	at = -1
	for k, s := range a.stops {
		if i := bytes.Index(a.pending, s); i >= 0 && (at < 0 || i < at) {
			at, which = i, k
		}
	}
	return at, which
}

// stopPrefixHold is the length of the longest tail of pending that is a
// proper prefix of a stop string.
func (a *textAssembler) stopPrefixHold() int {
	hold := 0
	for _, s := range a.stops {
		for k := min(len(s)-1, len(a.pending)); k > hold; k-- {
			if bytes.HasSuffix(a.pending, s[:k]) {
				hold = k
				break
			}
		}
	}
	return hold
}

// sanitize is b as text, by modeld's one UTF-8 rule (internal/utf8text):
// each byte that does not begin a valid encoding is U+FFFD. The cuts push
// makes (before an incomplete character, before a stop string's first
// byte) are where decoding the whole output would be too, so the text
// released token by token equals the whole output's.
func sanitize(b []byte) string { return utf8text.Valid(b) }
