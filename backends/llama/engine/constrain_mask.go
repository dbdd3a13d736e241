package engine

import (
	"bytes"
	"math"
	"unicode/utf8"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// The grammar's verdict on every token, without asking it about every
// token. A grammar that rejects a piece rejects every piece that begins
// with it: llama.cpp's grammar reads a piece's characters in order, and
// once no rule can go on, none can after more characters. So the tokens
// whose pieces are valid UTF-8 (no NUL, not control tokens, not ends of
// generation) form a forest by prefix: a token's parent is the token with
// the longest piece that is a proper prefix of its own, ending on a
// character boundary. The grammar is asked about the roots, then about the
// children of the tokens it allowed, level by level; a token below one it
// rejected is rejected unasked. The other tokens (pieces with invalid or
// incomplete UTF-8, NUL, control tokens, ends of generation) are asked
// directly. Over Qwen 2.5's 151k tokens in a JSON grammar, a few thousand
// are asked instead of all.

// pieceForest is a vocabulary's tokens by prefix, read once per decoder.
type pieceForest struct {
	parent []int32      // by token: the parent token, -1 for a root or a direct token
	levels [][]yz.Token // the forest's tokens by depth, roots first
	direct []yz.Token   // the tokens outside the forest
}

// newPieceForest builds the forest of n tokens; piece is a token's text
// as the grammar reads it (control tokens as text), plain its text without
// control tokens, eog whether it ends a generation.
func newPieceForest(n int, piece func(yz.Token) []byte, plain func(yz.Token) string, eog func(yz.Token) bool) *pieceForest {
	f := &pieceForest{parent: make([]int32, n)}
	byPiece := make(map[string]int32, n)
	inForest := make([]bool, n)
	for t := range n {
		f.parent[t] = -1
		p := piece(yz.Token(t))
		if len(p) == 0 || !utf8.Valid(p) || bytes.IndexByte(p, 0) >= 0 || eog(yz.Token(t)) || plain(yz.Token(t)) != string(p) {
			f.direct = append(f.direct, yz.Token(t))
			continue
		}
		inForest[t] = true
		if _, dup := byPiece[string(p)]; !dup {
			byPiece[string(p)] = int32(t)
		}
	}
	depth := make([]int32, n)
	var depthOf func(t int32) int32
	depthOf = func(t int32) int32 {
		if depth[t] > 0 {
			return depth[t]
		}
		d := int32(1)
		if p := f.parent[t]; p >= 0 {
			d = depthOf(p) + 1
		}
		depth[t] = d
		return d
	}
	for t := range n {
		if !inForest[t] {
			continue
		}
		p := piece(yz.Token(t))
		for end := len(p) - 1; end > 0; end-- {
			if !utf8.RuneStart(p[end]) {
				continue
			}
			if q, ok := byPiece[string(p[:end])]; ok && q != int32(t) {
				f.parent[t] = q
				break
			}
		}
	}
	for t := range n {
		if !inForest[t] {
			continue
		}
		d := int(depthOf(int32(t)))
		for len(f.levels) < d {
			f.levels = append(f.levels, nil)
		}
		f.levels[d-1] = append(f.levels[d-1], yz.Token(t))
	}
	return f
}

// allowedMask sets d.allowed[t] to whether grammar g allows token t next,
// for every token of the vocabulary.
func (d *llamaDecoder) allowedMask(g yz.Sampler) []bool {
	n := d.m.nVocab
	if d.forest == nil {
		d.forest = newPieceForest(n, func(t yz.Token) []byte { return d.lazy.piece(d.m, t) },
			func(t yz.Token) string { return d.m.piece(t, false) }, d.isEOG)
	}
	if len(d.allowed) != n {
		d.allowed = make([]bool, n)
	}
	f := d.forest
	ask := func(toks []yz.Token) {
		if len(toks) == 0 {
			return
		}
		d.asked = d.asked[:0]
		for _, t := range toks {
			d.asked = append(d.asked, yz.TokenData{Id: t})
		}
		arr := yz.TokenDataArray{Data: &d.asked[0], Size: uint64(len(d.asked)), Selected: -1}
		yz.SamplerApply(g, &arr)
		for _, td := range d.asked {
			d.allowed[td.Id] = !math.IsInf(float64(td.Logit), -1)
		}
	}
	ask(f.direct)
	var next []yz.Token
	for _, level := range f.levels {
		next = next[:0]
		for _, t := range level {
			if p := f.parent[t]; p >= 0 && !d.allowed[p] {
				d.allowed[t] = false
				continue
			}
			next = append(next, t)
		}
		ask(next)
	}
	return d.allowed
}

// mask sets the logit of each of arr's candidates that allowed forbids to
// -inf.
func mask(arr yz.TokenDataArray, allowed []bool) {
	neg := float32(math.Inf(-1))
	cand := unsafeCandidates(arr)
	for i := range cand {
		if id := cand[i].Id; id < 0 || int(id) >= len(allowed) || !allowed[id] {
			cand[i].Logit = neg
		}
	}
}
