package engine

import (
	"math"
	"unsafe"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Sampling under a grammar: sample first, constrain on rejection.
//
// Applying a grammar to a candidate walks the grammar's stacks over the
// token's characters; over a vocabulary of 151k tokens that is most of a
// step's time. So a sequence under a grammar draws from the distribution
// without it (logit bias, penalties, filters, temperature, as always),
// asks the grammar about that one token, and takes it when the grammar
// accepts it. Only on a rejection is the grammar applied to the candidates
// the draw had (those the filters kept, with a finite logit), and the
// token drawn again from what it allows.
//
// Why that is exact. Let q be the distribution the filters and the
// temperature leave and A the tokens the grammar allows, with Q = q(A) > 0.
// The first draw gives t in A with probability q(t); it is rejected with
// probability 1-Q, and then the redraw gives t with probability q(t)/Q. So
// P(t) = q(t) + (1-Q)·q(t)/Q = q(t)/Q for t in A, and 0 outside A: the
// masked distribution q(t)/Q exactly, whatever the redraw's randomness
// (an independent stream of the same seed, drawSeed). Greedy: the
// unconstrained argmax, when allowed, is also the argmax among the allowed
// tokens (ties go to the lower id both ways, as candidates are in id
// order); when not, the redraw is the argmax over the masked candidates,
// as before. Greedy output is therefore the same token for token.
//
// The order this keeps exact. The grammar now applies after top-k, top-p
// and min-p, not before them: the filters see the model's distribution
// and the grammar masks what they kept (and temperature, a monotone
// rescaling, commutes with a mask). With no filter (the default) the two
// orders are one distribution. Where the filters kept no allowed token
// (Q = 0), the step falls back to the old order, grammar first, then the
// filters and the draw: so a token is drawn from q masked to A when that
// is not empty, else from the filters applied to the masked distribution.
// Both cases are decided by the logits alone, so the step is still one
// fixed distribution, which rejection sampling reproduces exactly.

// seqSampler is one sequence's sampler: one chain (newSampler) without a
// grammar; with one, its stages apart.
type seqSampler struct {
	chain yz.Sampler // without a grammar: the whole chain
	// Under a grammar:
	shape  yz.Sampler // logit bias, penalties
	gram   yz.Sampler // the grammar, or a lazy grammar's stage chain
	lazy   bool       // gram is a lazy grammar's stage chain
	draw   yz.Sampler // greedy, or filters, temperature and the seeded draw
	redraw yz.Sampler // greedy, or a seeded draw alone: the draw after a rejection
}

// newSeqSampler builds seq's sampler for s under grammar; maskFirst: the
// one chain with the grammar first even under a grammar (the reference
// order, which the tests compare sampling first with).
func newSeqSampler(s Sampling, vocab yz.Vocab, grammar constraint, nVocab, ctxSize int, maskFirst bool) seqSampler {
	constrained := grammar.stage != 0 || grammar.text != "" && grammar.trig == nil // as grammarStage
	if maskFirst || !constrained {
		return seqSampler{chain: newSampler(s, vocab, grammar, nVocab, ctxSize)}
	}
	return splitSampler(s, vocab, grammar, nVocab, ctxSize)
}

// splitSampler is seq's sampler for s under grammar (if any) with its
// stages apart.
func splitSampler(s Sampling, vocab yz.Vocab, grammar constraint, nVocab, ctxSize int) seqSampler {
	redraw := yz.SamplerInitGreedy()
	if s.Temperature > 0 {
		redraw = yz.SamplerInitDist(drawSeed(s, 1))
	}
	return seqSampler{shape: shapeChain(s, nVocab, ctxSize), gram: grammarStage(vocab, grammar), lazy: grammar.stage != 0,
		draw: drawChain(s), redraw: redraw}
}

// constrained reports whether a grammar constrains ss's next draw (a lazy
// grammar only once it has joined its stage).
func (ss *seqSampler) constrained() bool {
	return ss.gram != 0 && (!ss.lazy || yz.SamplerChainN(ss.gram) > 0)
}

// free frees what ss holds.
func (ss *seqSampler) free() {
	for _, p := range []*yz.Sampler{&ss.chain, &ss.shape, &ss.gram, &ss.draw, &ss.redraw} {
		if *p != 0 {
			yz.SamplerFree(*p)
			*p = 0
		}
	}
}

// accept moves every stage past tok.
func (ss *seqSampler) accept(tok yz.Token) {
	for _, p := range []yz.Sampler{ss.chain, ss.shape, ss.gram, ss.draw, ss.redraw} {
		if p != 0 {
			yz.SamplerAccept(p, tok)
		}
	}
}

// sampleFirst draws seq's token from the logits of batch index i under
// its grammar (see above) and accepts it.
func (d *llamaDecoder) sampleFirst(ss *seqSampler, i int32) yz.Token {
	arr := d.candidates(i)
	yz.SamplerApply(ss.shape, &arr)
	yz.SamplerApply(ss.draw, &arr)
	tok := selected(arr)
	if ss.constrained() && !allows(ss.gram, tok) {
		tok = d.redraw(ss, arr, i, nil)
	}
	ss.accept(tok)
	return tok
}

// redraw is the draw after the grammar rejected the first: the grammar
// over arr's candidates with a finite logit, then the redraw stage; the
// reference order when none is allowed. A few candidates (top-k, inside a
// split character) are put to the grammar directly, many through the
// prefix forest (constrain_mask.go), unless allowed already holds its
// verdicts.
func (d *llamaDecoder) redraw(ss *seqSampler, arr yz.TokenDataArray, i int32, allowed []bool) yz.Token {
	d.kept = d.kept[:0]
	for _, td := range unsafeCandidates(arr) {
		if !math.IsInf(float64(td.Logit), -1) {
			d.kept = append(d.kept, td)
		}
	}
	constrain := func(a *yz.TokenDataArray) {
		if allowed == nil && a.Size <= directAsk {
			yz.SamplerApply(ss.gram, a)
			return
		}
		if allowed == nil {
			allowed = d.allowedMask(ss.gram)
		}
		mask(*a, allowed)
	}
	if len(d.kept) > 0 {
		k := yz.TokenDataArray{Data: &d.kept[0], Size: uint64(len(d.kept)), Selected: -1}
		constrain(&k)
		for _, td := range d.kept {
			if !math.IsInf(float64(td.Logit), -1) {
				yz.SamplerApply(ss.redraw, &k)
				return selected(k)
			}
		}
	}
	arr = d.candidates(i)
	yz.SamplerApply(ss.shape, &arr)
	constrain(&arr)
	yz.SamplerApply(ss.draw, &arr)
	return selected(arr)
}

// directAsk is the most candidates put to the grammar one by one rather
// than through the prefix forest.
const directAsk = 2048

// candidates is the whole vocabulary with the logits of batch index i, in
// id order, in d.cur.
func (d *llamaDecoder) candidates(i int32) yz.TokenDataArray {
	n := d.m.nVocab
	if len(d.cur) != n {
		d.cur = make([]yz.TokenData, n)
	}
	logits, err := yz.GetLogitsIth(d.lctx, i, n)
	if err != nil || len(logits) < n {
		logits = nil // cannot happen after a decode that asked for them: a flat distribution
	}
	for t := range d.cur {
		var l float32
		if logits != nil {
			l = logits[t]
		}
		d.cur[t] = yz.TokenData{Id: yz.Token(t), Logit: l}
	}
	return yz.TokenDataArray{Data: &d.cur[0], Size: uint64(n), Selected: -1}
}

// selected is the token arr's draw picked (its first candidate if none).
func selected(arr yz.TokenDataArray) yz.Token {
	cand := unsafeCandidates(arr)
	if arr.Selected >= 0 && arr.Selected < int64(len(cand)) {
		return cand[arr.Selected].Id
	}
	return cand[0].Id
}

// allows reports whether grammar g allows tok next.
func allows(g yz.Sampler, tok yz.Token) bool {
	td := yz.TokenData{Id: tok}
	arr := yz.TokenDataArray{Data: &td, Size: 1, Selected: -1}
	yz.SamplerApply(g, &arr)
	return !math.IsInf(float64(td.Logit), -1)
}

// unsafeCandidates is arr's candidates as a slice (of the memory arr
// points to).
func unsafeCandidates(arr yz.TokenDataArray) []yz.TokenData {
	return unsafe.Slice(arr.Data, arr.Size)
}
