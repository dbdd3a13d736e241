package engine

import (
	"context"
	"time"

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
	// speculative is the request's choice of prompt lookup (speculate.go);
	// nil: the model's.
	speculative *bool
	// media is a prompt with images (visionprompt.go), evaluated whole
	// when the request takes a slot (startMedia); nil for text.
	media *mediaPrompt
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
	// base is the scheduler's value floor when sl was last given a request:
	// its cached prefix's value against eviction is base plus its length.
	base uint64
	// answer is the last answer's tokens still to evaluate again while
	// idle (answers.go); dropped when the slot takes a request.
	answer pendingAnswer
	idleAt time.Time // when its last request ended

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

// Slot choice. A slot's KV, kept after its request ended, is a cached
// prefix that the next request of the same conversation reuses (an agent's
// long system prompt and tools, thousands of tokens). A request takes, in
// this order:
//
//  1. the idle slot whose reusable prefix with its prompt is substantial —
//     at least half of that slot's reusable cache — the longest such
//     prefix, among equals the one losing the fewest reusable tokens, then
//     the least recently used;
//  2. else an empty slot (one that caches nothing reusable);
//  3. else it evicts the cached prefix of least value. A prefix's value is
//     its reusable length in tokens (what rebuilding it costs) plus the
//     value the last evicted prefix had when this one was last used
//     (GreedyDual-Size, with each slot one unit of size): a long prefix
//     outlives many short ones, and a prefix unused for long loses to ones
//     used since. Among equals the least recently used goes.
//
// A slot's reusable cache is its exact prefix (slot.exact): the prompt
// tokens of its last request, and its answer's once answers.go has
// evaluated them again while idle (decoded one token a step, their KV is
// not what a prompt evaluation gives). So a conversation's next turn,
// which repeats the last prompt, always reuses its slot however long the
// answer was.
//
// So a short side request never evicts a long prefix while a slot is empty,
// and a burst of them evicts each other before an agent's prompt.

// reusable is how many of prompt's leading tokens sl's KV gives as a fresh
// evaluation would (start reuses no more).
func (sl *slot) reusable(prompt []yz.Token) int {
	return min(commonPrefix(sl.cache, prompt), sl.exact)
}

// value is sl's cached prefix's worth against eviction (see above).
func (sl *slot) value() uint64 { return sl.base + uint64(sl.exact) }

// substantialReuse reports whether reusing n of sl's cached tokens is worth
// taking sl over an empty slot: it keeps at least half of what sl caches
// that could be reused.
func substantialReuse(n int, sl *slot) bool {
	return n > 0 && 2*n >= sl.exact
}

// betterReuse reports whether reusing an tokens of a beats bn of b: more
// tokens, then fewer reusable tokens lost, then the least recently used.
func betterReuse(a *slot, an int, b *slot, bn int) bool {
	if an != bn {
		return an > bn
	}
	if la, lb := a.exact-an, b.exact-bn; la != lb {
		return la < lb
	}
	return a.used < b.used
}

// chooseSlot is the idle slot that prompt takes (see above); nil when none
// is idle. It only reads the slots.
func chooseSlot(slots []*slot, prompt []yz.Token) *slot {
	var reuse, empty, evict *slot
	reuseLen := 0
	for _, sl := range slots {
		if !sl.idle() {
			continue
		}
		if sl.exact == 0 {
			if empty == nil {
				empty = sl
			}
			continue
		}
		if n := sl.reusable(prompt); substantialReuse(n, sl) && (reuse == nil || betterReuse(sl, n, reuse, reuseLen)) {
			reuse, reuseLen = sl, n
		}
		if evict == nil || sl.value() < evict.value() || sl.value() == evict.value() && sl.used < evict.used {
			evict = sl
		}
	}
	switch {
	case reuse != nil:
		return reuse
	case empty != nil:
		return empty
	}
	return evict
}

// pickSlot chooses the idle slot for prompt (chooseSlot) and, when that
// evicts a cached prefix, raises the value floor to the evicted one's.
// nil when no slot is idle.
func (s *scheduler) pickSlot(prompt []yz.Token) *slot {
	sl := chooseSlot(s.slots, prompt)
	if sl != nil && sl.exact > 0 && !substantialReuse(sl.reusable(prompt), sl) {
		s.floor = max(s.floor, sl.value())
	}
	return sl
}

// start gives r to sl: it keeps the KV of the common prefix (at least one
// prompt token is always evaluated, for its logits), removes the rest, and
// builds the sampler chain.
func (s *scheduler) start(sl *slot, r *request) {
	// Reuse only KV that equals a fresh evaluation, and leave at least two
	// prompt tokens to evaluate (one alone would take the one-token kernels),
	// so that output with reuse is the output without it.
	common := min(commonPrefix(sl.cache, r.prompt), sl.exact)
	s.keepDropped(sl, common)
	common = s.restorePrefix(sl, r.prompt, common)
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
	sl.answer = pendingAnswer{}
	s.clock++
	sl.used, sl.base = s.clock, s.floor
	sl.r = r
	sl.nPast = common
	sl.hasNext = false
	s.startSampler(sl, r)
	sl.text = newTextAssembler(r.stops)
	sl.usage = Usage{PromptTokens: len(r.prompt), CachedTokens: common}
	s.prefixQueried.Add(uint64(len(r.prompt)))
	s.prefixHit.Add(uint64(common))
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
	stop := ""
	if reason == FinishStop && sl.text != nil {
		stop = sl.text.matched
	}
	st := sl.r.stream
	s.dec.endSeq(sl.id)
	sl.r, sl.text, sl.hasNext, sl.followers = nil, nil, false, nil
	sl.idleAt = time.Now()
	s.active.Add(-1)
	s.noteKV()
	s.end(st, Event{Token: -1, Text: text, Done: true, Finish: reason, Err: err, Usage: sl.usage, Stop: stop})
}
