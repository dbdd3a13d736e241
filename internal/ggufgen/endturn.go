package ggufgen

import (
	"math"
	"strings"
)

// endConstant is the value every token embedding (but a blank one) carries in
// the end channel of an EndsTurns model.
const endConstant = 8

// endResidualVar is the mean square of a residual-stream dimension other
// than the end channel after the layers, as measured on the generated
// models (the embedding's unit variance plus what the layers add); it sets
// how much of the final norm the end channel gets.
const endResidualVar = 1.6

// endChannel is the dimension of an EndsTurns model that carries the end
// signal: the embedding writes endConstant there, no layer reads it (blind:
// the input column of every layer matrix is zero) or writes it (mute: the
// output row of attn_output and ffn_down is zero), so the final residual
// holds exactly the constant, and only the end token's output row reads it
// (and the new-line token's, with Options.LineAfter).
// The output norm makes the channel's share of the state almost the same at
// every position, so the end token's probability is almost the same at
// every step: answers end after a geometric number of tokens.
type endChannel struct {
	on  bool
	dim uint64
}

// blind zeroes the end channel's input column of a matrix whose rows are d0
// long.
func (c endChannel) blind(dst []float32, d0 uint64) {
	if !c.on {
		return
	}
	for r := uint64(0); r*d0 < uint64(len(dst)); r++ {
		dst[r*d0+c.dim] = 0
	}
}

// mute zeroes the end channel's output row of a matrix whose rows are d0
// long.
func (c endChannel) mute(dst []float32, d0 uint64) {
	if c.on {
		clear(dst[c.dim*d0 : (c.dim+1)*d0])
	}
}

// newlineToken is the id of the token that is one new line in the
// spellings vocabularies store it (byte-level BPE Ċ, SentencePiece's byte
// token, plain), or -1.
func newlineToken(tokens []string) int {
	for _, s := range []string{"Ċ", "<0x0A>", "\n"} {
		for id, t := range tokens {
			if t == s {
				return id
			}
		}
	}
	return -1
}

// weight is the output weight on the end channel that gives a token a
// probability of 1/after at temperature 1: its logit is then
// ln(Z/(after-1)), where Z is the expected sum of the other tokens'
// exponentiated logits. Those are uniform with the spread the output matrix
// gives the non-channel part of the normalised state (tensors: standard
// deviation 3/sqrt(Embd) per weight), and the silenced tokens' logits are 0.
func (c endChannel) weight(o Options, v *vocab, after int) float64 {
	e := float64(o.Embd)
	s := (e - 1) * endResidualVar // the other dimensions' sum of squares
	share := endConstant * math.Sqrt(e) / math.Sqrt(endConstant*endConstant+s)
	std := math.Sqrt(9 * s / (endConstant*endConstant + s))
	a := std * math.Sqrt(3)
	silent := len(v.silence)
	z := float64(len(v.tokens)-silent)*math.Sinh(a)/a + float64(silent)
	return math.Log(z/float64(after-1)) / share
}

// blankToken reports whether a token's text is only white space, in the
// spellings vocabularies store it: plain, byte-level BPE (Ġ space, Ċ new
// line, ĉ tab, č carriage return), SentencePiece (▁ and <0x0A> byte
// tokens). An EndsTurns model gives blank tokens no end constant, so the end
// token never follows one: an answer never ends in white space, and never
// before its first token, since chat templates end the prompt with a new
// line.
func blankToken(s string) bool {
	switch s {
	case "":
		return false
	case "<0x09>", "<0x0A>", "<0x0D>", "<0x20>":
		return true
	}
	return strings.Trim(s, " \t\r\nĠĊĉč▁") == ""
}
