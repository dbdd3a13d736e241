package engine

import (
	"context"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// request is a submitted generation.
type request struct {
	ctx    context.Context
	prompt []yz.Token
	budget int // completion tokens allowed
	stops  []string
	samp   Sampling
	stream *stream
	// grammar is the constraint every sampled token obeys (zero: none).
	grammar constraint
	// render, when set, turns a sampled token into text instead of the
	// decoder's piece (which leaves control tokens out).
	render func(yz.Token) string
	// logprobs asks for each token's log-probability, with top alternatives.
	logprobs bool
	top      int
	// followers are the other choices of an n > 1 request (choices.go):
	// each takes a slot when this one does and shares its prompt's KV.
	followers []*request
}

// slot is one sequence of the llama context. Only the scheduler goroutine
// touches it.
type slot struct {
	id    int
	cache []yz.Token // tokens whose KV the sequence holds, at positions 0..len-1
	// exact is how many leading cache tokens have the KV a fresh evaluation of
	// them as a prompt would give: each was decoded in a step of two or more
	// tokens (ggml's one-token kernels round differently), after an exact prefix.
	exact  int
	before int    // len(cache) when the current step began
	used   uint64 // scheduler clock when last given a request (LRU, admission order)

	r       *request // nil when idle
	nPast   int      // prompt tokens in the KV so far
	next    yz.Token // sampled token to feed in the next step
	hasNext bool
	logit   int32 // batch index of the token whose logits this slot samples, -1 none
	text    *textAssembler
	usage   Usage
	// followers are the slots that wait for this one's prompt (choices.go).
	followers []*slot
}

func (sl *slot) idle() bool       { return sl.r == nil }
func (sl *slot) prefilling() bool { return sl.r != nil && sl.nPast < len(sl.r.prompt) }

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []yz.Token) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// pickSlot chooses the idle slot for prompt: the one whose KV shares the
// longest prefix with it; among equals the least recently used, so other
// slots keep their prefixes. nil when no slot is idle.
func (s *scheduler) pickSlot(prompt []yz.Token) *slot {
	var best *slot
	bestLen := -1
	for _, sl := range s.slots {
		if !sl.idle() {
			continue
		}
		n := commonPrefix(sl.cache, prompt)
		if n > bestLen || n == bestLen && sl.used < best.used {
			best, bestLen = sl, n
		}
	}
	return best
}

// start gives r to sl: it keeps the KV of the common prefix (at least one
// prompt token is always evaluated, for its logits), removes the rest, and
// builds the sampler chain.
func (s *scheduler) start(sl *slot, r *request) {
	// Reuse only KV that equals a fresh evaluation, and leave at least two
	// prompt tokens to evaluate (one alone would take the one-token kernels),
	// so that output with reuse is the output without it.
	common := min(commonPrefix(sl.cache, r.prompt), sl.exact)
	if len(r.prompt)-common < 2 {
		common = max(0, len(r.prompt)-2)
	}
	if common < len(sl.cache) {
		if !s.dec.seqRemove(sl.id, common) {
			// A partial removal can fail; a whole sequence cannot.
			s.dec.seqRemove(sl.id, -1)
			common = 0
		}
	}
	sl.cache = sl.cache[:common]
	sl.exact = min(sl.exact, common)
	s.clock++
	sl.used = s.clock
	sl.r = r
	sl.nPast = common
	sl.hasNext = false
	s.startSampler(sl, r)
	sl.text = newTextAssembler(r.stops)
	sl.usage = Usage{PromptTokens: len(r.prompt), CachedTokens: common}
	s.active.Add(1)
}

// onToken handles a token sampled for sl: end of generation, stop strings,
// the length budget, or the next step's input.
func (s *scheduler) onToken(sl *slot, tok yz.Token, lp *Logprobs) {
	sl.usage.CompletionTokens++
	n := sl.usage.CompletionTokens
	defer func() {
		if s.hooks.AfterToken != nil {
			s.hooks.AfterToken(sl.id, n)
		}
	}()
	if s.dec.isEOG(tok) {
		s.finish(sl, FinishStop, nil, true)
		return
	}
	piece := sl.r.render
	if piece == nil {
		piece = s.dec.piece
	}
	text, stopped := sl.text.push(piece(tok))
	sl.r.stream.push(Event{Token: int32(tok), Text: text, Logprobs: lp})
	switch {
	case stopped:
		s.finish(sl, FinishStop, nil, false)
	case n >= sl.r.budget:
		s.finish(sl, FinishLength, nil, true)
	default:
		sl.next, sl.hasNext = tok, true
	}
}

// finish ends sl's request with its final event and frees the slot; the KV
// (and sl.cache) stay for the next request's prefix. The slot is free
// before the final event is sent, so a caller that saw it sees Stats agree.
func (s *scheduler) finish(sl *slot, reason FinishReason, err error, flush bool) {
	text := ""
	if flush {
		text = sl.text.flush()
	}
	st := sl.r.stream
	s.dec.endSeq(sl.id)
	sl.r, sl.text, sl.hasNext, sl.followers = nil, nil, false, nil
	s.active.Add(-1)
	s.noteKV()
	s.end(st, Event{Token: -1, Text: text, Done: true, Finish: reason, Err: err, Usage: sl.usage})
}
