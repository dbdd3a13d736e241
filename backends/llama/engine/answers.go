package engine

import (
	"slices"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Answers made reusable (Options.ReuseAnswers).
//
// A slot's exact prefix (slot.exact) ends where its last answer began:
// each generated token was decoded in a one-token step, whose KV a prompt
// evaluation would not give, so the next turn of the conversation, whose
// prompt repeats that answer, evaluates it again before its first token.
// For an agent that is the whole previous reply (a patch, a tool call) on
// every turn's critical path.
//
// While nothing runs (an agent running its tool, a user reading), the
// scheduler evaluates each idle slot's answer again the way a prompt is
// evaluated: the answer's KV is dropped and its tokens are decoded in
// steps of two or more, which gives the KV a fresh evaluation would, so
// the answer joins the exact prefix and the next turn reuses it. Output
// stays what it is without this, since only exact KV is ever reused.
//
// A slot's answer waits answerDelay after its request ended first: a
// client that sends its next turn at once (a script, a tool that takes no
// time) then gets the tail evaluated with its prompt in one step, instead
// of waiting for a step of its own. A step carries at most answerStep
// tokens, and the loop admits requests between steps: a request that
// arrives meanwhile waits for one such step at most. A slot given a
// request before its answer is done keeps what was evaluated so far; the
// rest of the answer, if its prompt repeats it, is evaluated with the
// prompt.

// answerStep is the most answer tokens one idle step evaluates;
// answerDelay is how long a slot is idle before its answer is.
const (
	answerStep  = 64
	answerDelay = 50 * time.Millisecond
)

// pendingAnswer is a slot's answer still to evaluate again: its tokens,
// whose KV has been dropped, and the cache length they continue.
type pendingAnswer struct {
	tokens []yz.Token
	at     int
}

// reuseAnswerStep evaluates one step of an idle slot's answer; it reports
// whether it did (false: nothing to do). Loop goroutine, only while no
// request runs.
func (s *scheduler) reuseAnswerStep() bool {
	if !s.reuseAnswers {
		return false
	}
	sl, _ := s.answerSlot(time.Now())
	if sl == nil {
		return false
	}
	if sl.answer.at != len(sl.cache) || len(sl.answer.tokens) == 0 {
		if !s.takeAnswer(sl) {
			return false
		}
	}
	toks := sl.answer.tokens
	n := min(answerStep, len(toks))
	if len(toks)-n == 1 {
		n-- // the last step carries two tokens, not one
	}
	s.batch = s.batch[:0]
	for i, t := range toks[:n] {
		s.add(t, len(sl.cache)+i, sl, false)
	}
	err := s.dec.decode(s.batch)
	s.decodeCalls.Add(1)
	s.decodedTokens.Add(uint64(n))
	if err != nil {
		// The sequence's KV is unknown now: drop it all.
		s.dec.seqRemove(sl.id, -1)
		sl.cache, sl.exact, sl.answer = sl.cache[:0], 0, pendingAnswer{}
		return true
	}
	sl.cache = append(sl.cache, toks[:n]...)
	sl.exact = len(sl.cache)
	s.reevaluated.Add(uint64(n))
	if n == len(toks) {
		sl.answer = pendingAnswer{}
	} else {
		sl.answer = pendingAnswer{tokens: toks[n:], at: len(sl.cache)}
	}
	return true
}

// answerSlot is the idle slot whose answer is evaluated next: one already
// under way, else the most recently used one with an answer to evaluate
// that has waited answerDelay. When there is none, wait is how long until
// the first answer waiting is due (0: none waits).
func (s *scheduler) answerSlot(now time.Time) (pick *slot, wait time.Duration) {
	for _, sl := range s.slots {
		if !sl.idle() {
			continue
		}
		if len(sl.answer.tokens) > 0 && sl.answer.at == len(sl.cache) {
			return sl, 0
		}
		if answerTail(sl) < 0 {
			continue
		}
		if left := s.answerDelay - now.Sub(sl.idleAt); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		if pick == nil || sl.used > pick.used {
			pick = sl
		}
	}
	if pick != nil {
		wait = 0
	}
	return pick, wait
}

// answerWait is a timer's channel that fires when an idle slot's answer is
// due (nil: none waits), and the function that stops the timer.
func (s *scheduler) answerWait() (<-chan time.Time, func()) {
	if !s.reuseAnswers {
		return nil, func() {}
	}
	_, wait := s.answerSlot(time.Now())
	if wait <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(wait)
	return t.C, func() { t.Stop() }
}

// answerTail is where the tokens of sl's cache that a step of two or more
// would make exact begin, or -1 when there are none: the inexact tail,
// widened to two tokens, and never over a prompt with images (its KV is
// no text's).
func answerTail(sl *slot) int {
	if sl.exact >= len(sl.cache) || len(sl.cache) < 2 {
		return -1
	}
	from := min(sl.exact, len(sl.cache)-2)
	if slices.Contains(sl.cache[from:], noImageKV) {
		return -1
	}
	return from
}

// takeAnswer drops the KV of sl's inexact tail and makes it sl's pending
// answer; false when there is none or the backend cannot drop part of a
// sequence (a recurrent model's state), which turns this off.
func (s *scheduler) takeAnswer(sl *slot) bool {
	from := answerTail(sl)
	if from < 0 {
		return false
	}
	if !s.dec.seqRemove(sl.id, from) {
		s.reuseAnswers = false
		return false
	}
	sl.answer = pendingAnswer{tokens: slices.Clone(sl.cache[from:]), at: from}
	sl.cache = sl.cache[:from]
	sl.exact = min(sl.exact, from)
	return true
}
