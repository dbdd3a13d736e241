package engine

import (
	"fmt"
	"math"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// Log-probabilities of the generated tokens (Request.Logprobs and
// TopLogprobs).
//
// Which distribution: the log-softmax, over the whole vocabulary, of the
// model's logits after the logit bias, the penalties and the grammar (tools,
// response_format) and before temperature, top-k, top-p and min-p. That is
// the distribution the request's constraints leave, at temperature 1: a
// token the grammar or a -100 bias forbids is not among the alternatives,
// and the numbers do not change with the sampling filters. (llama.cpp's
// server reports the raw logits' probabilities by default and those after
// its whole sampling chain with post_sampling_probs; this sits between.)
//
// A request that does not ask for them samples as before (sampler.go,
// constrain.go): no per-token cost. One that asks samples through the same
// stages (splitSampler): the logit bias and penalties are applied to a
// candidate array of the whole vocabulary, the grammar's verdict on every
// token is read (constrain_mask.go), the log-probabilities are read off
// the allowed tokens, and the draw picks from the array, first and on
// rejection as constrain.go does, so the token drawn is the one the plain
// path would draw.

// maxTopLogprobs bounds TopLogprobs (OpenAI's limit).
const maxTopLogprobs = 20

// logprobFloor is the least log-probability reported: JSON has no -Inf,
// and OpenAI reports -9999 for a token that cannot be drawn.
const logprobFloor = -9999

// wantsLogprobs reports whether r asks for log-probabilities.
func wantsLogprobs(r *Request) bool { return r.Logprobs || r.TopLogprobs > 0 }

// checkLogprobs refuses a top_logprobs outside [0, maxTopLogprobs].
func checkLogprobs(r *Request) error {
	if r.TopLogprobs < 0 || r.TopLogprobs > maxTopLogprobs {
		return &backends.BadRequestError{Param: "top_logprobs",
			Message: fmt.Sprintf("top_logprobs %d is outside [0, %d]", r.TopLogprobs, maxTopLogprobs)}
	}
	return nil
}

// logprobDecoder is a decoder that reports log-probabilities (the llama
// one; the scheduler tests' fakes need not).
type logprobDecoder interface {
	// startSeqLogprobs is startSeq for a sequence whose tokens report
	// log-probabilities; endSeq frees what it made.
	startSeqLogprobs(seq int, samp Sampling, grammar constraint)
	// sampleLogprobs is sample, with the drawn token's log-probability and
	// the top most likely tokens'.
	sampleLogprobs(seq int, i int32, top int) (yz.Token, *backends.Logprobs)
}

// startSampler gives sl the sampler of r.
func (s *scheduler) startSampler(sl *slot, r *request) {
	if lp, ok := s.dec.(logprobDecoder); ok && r.logprobs {
		lp.startSeqLogprobs(sl.id, r.samp, r.grammar)
		return
	}
	s.dec.startSeq(sl.id, r.samp, r.grammar)
}

// sampleSlot draws sl's next token from the logits of batch index i.
func (s *scheduler) sampleSlot(sl *slot, i int32) (yz.Token, *backends.Logprobs) {
	if lp, ok := s.dec.(logprobDecoder); ok && sl.r.logprobs {
		return lp.sampleLogprobs(sl.id, i, sl.r.top)
	}
	return s.dec.sample(sl.id, i), nil
}

func (d *llamaDecoder) startSeqLogprobs(seq int, samp Sampling, grammar constraint) {
	d.guardStart(seq, grammar)
	d.lp[seq] = splitSampler(samp, d.m.vocab, d.lazyStart(seq, grammar), d.m.nVocab, d.nCtx)
}

func (d *llamaDecoder) endLogprobs(seq int) { d.lp[seq].free() }

func (d *llamaDecoder) sampleLogprobs(seq int, i int32, top int) (yz.Token, *backends.Logprobs) {
	ss := &d.lp[seq]
	n := d.m.nVocab
	if len(d.shaped) != n {
		d.shaped = make([]float32, n)
	}
	d.guard(seq, i)
	arr := d.candidates(i)
	yz.SamplerApply(ss.shape, &arr)
	var allowed []bool
	if ss.constrained() {
		allowed = d.allowedMask(ss.gram)
	}
	// The shaping samplers change logits in place; read them by token id
	// before the draw (temperature, filters) changes them again.
	neg := float32(math.Inf(-1))
	for t := range d.shaped {
		d.shaped[t] = neg
	}
	for _, td := range unsafeCandidates(arr) {
		if int(td.Id) >= 0 && int(td.Id) < n && (allowed == nil || allowed[td.Id]) {
			d.shaped[td.Id] = td.Logit
		}
	}
	yz.SamplerApply(ss.draw, &arr)
	tok := selected(arr)
	if allowed != nil && !allowed[tok] {
		tok = d.redraw(ss, arr, i, allowed)
	}
	ss.accept(tok)
	d.lazyAccept(seq, tok)
	d.guardAccept(seq, tok)
	return tok, d.tokenLogprobs(tok, top)
}

// tokenLogprobs reads tok's log-probability and the top alternatives off
// d.shaped.
func (d *llamaDecoder) tokenLogprobs(tok yz.Token, top int) *backends.Logprobs {
	norm := logNormalizer(d.shaped)
	lp := &backends.Logprobs{TokenLogprob: backends.TokenLogprob{
		ID: int32(tok), Bytes: []byte(d.m.piece(tok, true)), Logprob: logprob(d.shaped[tok], norm),
	}}
	for _, id := range topTokens(d.shaped, top) {
		lp.Top = append(lp.Top, backends.TokenLogprob{
			ID: id, Bytes: []byte(d.m.piece(yz.Token(id), true)), Logprob: logprob(d.shaped[id], norm),
		})
	}
	return lp
}

// logNormalizer is log(sum(exp(l))) over the finite logits, computed
// stably; 0 when none is finite.
func logNormalizer(logits []float32) float64 {
	hi := math.Inf(-1)
	for _, l := range logits {
		if v := float64(l); v > hi {
			hi = v
		}
	}
	if math.IsInf(hi, 0) {
		return 0
	}
	var sum float64
	for _, l := range logits {
		if !math.IsInf(float64(l), -1) {
			sum += math.Exp(float64(l) - hi)
		}
	}
	return hi + math.Log(sum)
}

// logprob is logit's log-probability under norm, floored at logprobFloor.
func logprob(logit float32, norm float64) float32 {
	v := float64(logit) - norm
	if math.IsNaN(v) || v < logprobFloor {
		return logprobFloor
	}
	return float32(v)
}

// topTokens is the ids of the k largest finite logits, largest first (ties:
// the lower id first).
func topTokens(logits []float32, k int) []int32 {
	if k <= 0 {
		return nil
	}
	best := make([]int32, 0, k+1)
	for id, l := range logits {
		if math.IsInf(float64(l), -1) || math.IsNaN(float64(l)) {
			continue
		}
		if len(best) == k && l <= logits[best[k-1]] {
			continue
		}
		at := len(best)
		for at > 0 && logits[best[at-1]] < l {
			at--
		}
		best = append(best, 0)
		copy(best[at+1:], best[at:])
		best[at] = int32(id)
		if len(best) > k {
			best = best[:k]
		}
	}
	return best
}
