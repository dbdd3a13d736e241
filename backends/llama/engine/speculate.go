package engine

import "fmt"

// Speculative decoding by prompt lookup, in the scheduler's step (see
// lookup.go for the drafts). A generating sequence's next token goes into
// the step as always; its draft follows it, at the next positions, each
// with logits. After the decode the sequence samples at its next token's
// position as always, then, while the sampled token equals the drafted one
// at that position, at the drafted token's position too: the sampler (and
// its grammar, penalties and random draw) sees exactly the tokens it would
// have seen one step at a time, and only those. The first token that
// differs from the draft, or the one after a fully kept draft, is the next
// step's input; the KV of the drafted tokens after it is dropped.
//
// This is exact for any sampling, not only greedy: a drafted token is kept
// only when the token drawn from the model's distribution at its position
// is that token, so each emitted token is drawn from the distribution the
// model gives after the tokens really emitted before it (the point-mass
// case of speculative rejection sampling), and a seeded draw consumes one
// random number per emitted token, as without the draft. The logits of a
// drafted position come from a step of several tokens; ggml's one-token
// kernels round differently (see slot.exact), which the test models'
// greedy output is checked against (lookup_test.go).

// specSeq is a sequence's prompt-lookup state (scheduler goroutine only).
type specSeq struct {
	r    *request // the request look belongs to
	look lookupState
	n    int // tokens drafted in the current step
}

// lookupMax is the scheduler's draft size from Options.Lookup (0: off
// unless a request asks), -1 for a model that cannot draft.
func lookupMax(o Options, recurrent bool) int {
	if recurrent {
		// A recurrent state cannot drop the rejected tail of a draft.
		return -1
	}
	return max(0, o.Lookup)
}

// addDraft puts sl's draft into the step after its next token, at most
// room tokens, and shares per generating sequence.
func (s *scheduler) addDraft(sl *slot, room, generating int) {
	sp := &s.spec[sl.id]
	if sp.r != sl.r {
		*sp = specSeq{r: sl.r, look: newLookup(s.lookup, sl.r.speculative)}
	}
	sp.n = 0
	if !sp.look.on {
		return
	}
	most := min(sp.look.max/max(1, generating), room,
		sl.r.budget-sl.usage.CompletionTokens-1, s.ctxSize-len(sl.cache))
	d := draftFrom(sl.cache, most)
	if len(d) == 0 {
		return
	}
	pos := len(sl.cache)
	for j, t := range d {
		s.add(t, pos+j, sl, true)
	}
	sl.cache = append(sl.cache, d...)
	sp.n = len(d)
}

// sampleStep samples sl after a decode: its next token's position, then
// each drafted position while the draft holds (see above).
func (s *scheduler) sampleStep(sl *slot) {
	sp := &s.spec[sl.id]
	n := sp.n
	sp.n = 0
	r := sl.r
	base := len(sl.cache) - n // cache index (and position) of the first drafted token
	kept := 0
	for j := 0; ; j++ {
		tok, lp := s.sampleSlot(sl, sl.logit+int32(j))
		hit := j < n && tok == sl.cache[base+j]
		if j < n && !hit && !s.dropDraft(sl, base+j) {
			s.finish(sl, FinishError, errDropDraft, false)
			break
		}
		s.onToken(sl, tok, lp)
		if sl.r != r { // ended
			if hit {
				s.dropDraft(sl, base+j+1)
			}
			break
		}
		if !hit {
			break
		}
		kept++
		sl.hasNext = false // its KV is in place already
	}
	if n > 0 {
		s.drafts.Add(1)
		s.draftTokens.Add(uint64(n))
		s.acceptedTokens.Add(uint64(kept))
		if sp.r == r {
			sp.look.note(n, kept)
		}
	}
}

// errDropDraft ends a request whose rejected draft could not be dropped
// from its KV (lookupMax keeps recurrent models, whose state cannot drop a
// range, from drafting, so this is not expected).
var errDropDraft = fmt.Errorf("%w: the KV of a rejected draft could not be dropped", ErrDecode)

// dropDraft removes sl's KV from cache index from on (drafted tokens not
// kept); false when the backend could not, and then sl's KV is empty.
func (s *scheduler) dropDraft(sl *slot, from int) bool {
	if from >= len(sl.cache) {
		return true
	}
	ok := s.dec.seqRemove(sl.id, from)
	if !ok {
		s.dec.seqRemove(sl.id, -1)
		from = 0
	}
	sl.cache = sl.cache[:from]
	sl.exact = min(sl.exact, from)
	return ok
}
