package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/internal/utf8text"
)

// guardPieces is a vocabulary of the shapes byte-level and byte-fallback
// vocabularies have: whole characters, a character's first or last bytes,
// single bytes (every one of 0x80..0xFF), and the invalid sequences a
// lenient decoder takes for characters.
func guardPieces() []string {
	ps := []string{"", "a", " the", "€", "é", "🙂", "\xe2\x82", "\xac", "\xac!", "\x82\xac",
		"\xf0\x9f", "\x99\x82", "\xfc\x89", "\x88\x98", "\xc0\xaf", "\xed\xa0\x80", "\xe2A", "x\xff", "\xf4\x90\x80\x80", "\"}"}
	for b := 0x80; b <= 0xff; b++ {
		ps = append(ps, string([]byte{byte(b)}))
	}
	return ps
}

// TestUTF8GuardWalks: a sequence under the guard, drawing at random among
// the tokens it leaves, never makes its output invalid — whatever the
// draws, the text is valid UTF-8 at every step up to an incomplete last
// character, and with no draw can FC 89 88 98 (the bytes a model emitted
// under a tool-call grammar) or an overlong form appear — and it can
// still write a character split over byte tokens.
func TestUTF8GuardWalks(t *testing.T) {
	ps := guardPieces()
	v := newUTF8Vocab(len(ps), func(t yz.Token) []byte { return []byte(ps[t]) })
	rng := rand.New(rand.NewPCG(1, 2))
	var keep []float32
	split := 0
	for walk := range 2000 {
		g := utf8Seq{on: true}
		var out []byte
		for step := range 12 {
			logits := make([]float32, len(ps))
			g.mask(v, logits, &keep)
			var allowed []int
			for tok, l := range logits {
				if !math.IsInf(float64(l), -1) {
					allowed = append(allowed, tok)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("walk %d step %d: no token allowed after %q", walk, step, out)
			}
			tok := allowed[rng.IntN(len(allowed))]
			if len(g.tail) > 0 && len(ps[tok]) > 1 && ps[tok][0] >= 0x80 {
				split++
			}
			out = append(out, ps[tok]...)
			g.accept([]byte(ps[tok]))
			if cut := len(out) - utf8text.IncompleteTail(out); !utf8.Valid(out[:cut]) {
				t.Fatalf("walk %d: the guard let the output become %q", walk, out)
			}
			if string(g.tail) != string(out[len(out)-utf8text.IncompleteTail(out):]) {
				t.Fatalf("walk %d: guard tail %q, output %q", walk, g.tail, out)
			}
		}
	}
	if split == 0 {
		t.Error("no walk continued a split character with a multi-byte piece")
	}
	// After "\xe2\x82" only pieces that complete it validly remain.
	g := utf8Seq{on: true}
	g.accept([]byte("\xe2\x82"))
	logits := make([]float32, len(ps))
	g.mask(v, logits, &keep)
	for tok, l := range logits {
		ok := !math.IsInf(float64(l), -1)
		want := ps[tok] == "\xac" || ps[tok] == "\xac!" || (len(ps[tok]) == 1 && ps[tok][0] >= 0x80 && ps[tok][0] <= 0xbf)
		if ok != want {
			t.Errorf("after an incomplete €, %q allowed: %v, want %v", ps[tok], ok, want)
		}
	}
	// After a complete character no invalid piece remains.
	g = utf8Seq{on: true}
	logits = make([]float32, len(ps))
	g.mask(v, logits, &keep)
	for tok, l := range logits {
		ok := !math.IsInf(float64(l), -1)
		p := []byte(ps[tok])
		if want := utf8.Valid(p[:len(p)-utf8text.IncompleteTail(p)]); ok != want {
			t.Errorf("after a whole character, %q allowed: %v, want %v", ps[tok], ok, want)
		}
	}
}

// TestUTF8GuardNoContinuation: inside a split character in a vocabulary
// with no token to continue it, nothing is masked (the rule's U+FFFD then
// applies) rather than every logit.
func TestUTF8GuardNoContinuation(t *testing.T) {
	ps := []string{"a", "\xe2\x82", "b"}
	v := newUTF8Vocab(len(ps), func(t yz.Token) []byte { return []byte(ps[t]) })
	g := utf8Seq{on: true}
	g.accept([]byte("\xe2\x82"))
	logits := []float32{1, 2, 3}
	var keep []float32
	g.mask(v, logits, &keep)
	if logits[0] != 1 || logits[1] != 2 || logits[2] != 3 {
		t.Errorf("logits %v, want them untouched", logits)
	}
}
