package engine

import (
	"math"
	"unicode/utf8"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/internal/utf8text"
)

// Under a grammar the output is valid UTF-8 by construction. llama.cpp's
// grammar reads a token's bytes with a lenient UTF-8 decoder (the lead
// byte gives the length, continuation bytes are not checked), so it
// accepts bytes such as FC 89 88 98 as one "character" past U+10FFFF, an
// overlong '/', an encoded surrogate or a lead byte before ASCII — bytes
// that modeld's one UTF-8 rule (internal/utf8text) turns into one U+FFFD
// each, so that a string the grammar held to maxLength 8 or to a pattern
// would break it as text. So before each draw of a sequence under a
// grammar, every token that would make its output invalid UTF-8 gets the
// logit -inf: after a complete character, tokens with an invalid sequence
// or a stray continuation byte; inside a split character, every token but
// those that continue it validly. An incomplete character is allowed
// (the next token may complete it), so multi-byte characters spread over
// byte tokens stay possible. Where no token could continue a split
// character (a vocabulary without byte tokens) nothing is masked and the
// rule's U+FFFD applies.

// utf8Vocab is the UTF-8 shape of a vocabulary's pieces (control tokens
// as text), read once per decoder.
type utf8Vocab struct {
	// invalid: tokens never allowed after a complete character (their
	// piece has an invalid sequence or starts with a continuation byte).
	invalid []yz.Token
	// cont: tokens whose piece starts with a continuation byte, the only
	// candidates inside a split character, with their pieces.
	cont      []yz.Token
	contPiece [][]byte
}

// newUTF8Vocab classifies n pieces.
func newUTF8Vocab(n int, piece func(yz.Token) []byte) *utf8Vocab {
	v := &utf8Vocab{}
	for t := range n {
		p := piece(yz.Token(t))
		if len(p) > 0 && !utf8.RuneStart(p[0]) {
			v.cont = append(v.cont, yz.Token(t))
			v.contPiece = append(v.contPiece, p)
		}
		if !validAfter(nil, p) {
			v.invalid = append(v.invalid, yz.Token(t))
		}
	}
	return v
}

// validAfter reports whether the output stays valid UTF-8 (an incomplete
// last character allowed) when piece follows tail, the output's
// incomplete last character; inside a character an empty piece (a control
// token rendered as nothing, an end of generation) is not allowed either.
func validAfter(tail, piece []byte) bool {
	if len(tail) > 0 && len(piece) == 0 {
		return false
	}
	var buf [64]byte
	b := append(append(buf[:0], tail...), piece...)
	return utf8.Valid(b[:len(b)-utf8text.IncompleteTail(b)])
}

// utf8Seq is one sequence's guard: on under a grammar, and the output's
// incomplete last character.
type utf8Seq struct {
	on   bool
	tail []byte
}

// mask sets the logits of the tokens that would make the output invalid
// to -inf. keep is scratch space.
func (g *utf8Seq) mask(v *utf8Vocab, logits []float32, keep *[]float32) {
	neg := float32(math.Inf(-1))
	if len(g.tail) == 0 {
		for _, t := range v.invalid {
			if int(t) < len(logits) {
				logits[t] = neg
			}
		}
		return
	}
	*keep = (*keep)[:0]
	some := false
	for i, t := range v.cont {
		l := neg
		if int(t) < len(logits) && validAfter(g.tail, v.contPiece[i]) {
			l, some = logits[t], true
		}
		*keep = append(*keep, l)
	}
	if !some {
		return
	}
	for i := range logits {
		logits[i] = neg
	}
	for i, t := range v.cont {
		if int(t) < len(logits) {
			logits[t] = (*keep)[i]
		}
	}
}

// accept moves the guard past piece, the token drawn.
func (g *utf8Seq) accept(piece []byte) {
	b := append(g.tail, piece...)
	k := utf8text.IncompleteTail(b)
	g.tail = append(g.tail[:0], b[len(b)-k:]...)
}

// guardStart turns seq's guard on when it samples under a grammar.
func (d *llamaDecoder) guardStart(seq int, grammar constraint) {
	for len(d.u8) <= seq {
		d.u8 = append(d.u8, utf8Seq{})
	}
	d.u8[seq].on = grammar.text != ""
	d.u8[seq].tail = d.u8[seq].tail[:0]
}

// guard masks the logits of batch index i for seq before its draw.
func (d *llamaDecoder) guard(seq int, i int32) {
	if seq >= len(d.u8) || !d.u8[seq].on {
		return
	}
	if d.u8v == nil {
		d.lazy.take()
		d.u8v = d.lazy.u8v
	}
	if d.u8v == nil {
		d.u8v = newUTF8Vocab(d.m.nVocab, func(t yz.Token) []byte { return d.lazy.piece(d.m, t) })
	}
	logits, err := yz.GetLogitsIth(d.lctx, i, d.m.nVocab)
	if err != nil || len(logits) < d.m.nVocab {
		return
	}
	d.u8[seq].mask(d.u8v, logits, &d.u8keep)
}

// guardAccept moves seq's guard past tok.
func (d *llamaDecoder) guardAccept(seq int, tok yz.Token) {
	if seq < len(d.u8) && d.u8[seq].on {
		d.u8[seq].accept(d.lazy.piece(d.m, tok))
	}
}
