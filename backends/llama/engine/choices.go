package engine

import (
	"fmt"
	"sync"

	"github.com/modeld/modeld/backends"
)

// Choices (Request.N > 1): the n completions of one prompt run as n
// sequences, one slot each, admitted together. The first (the leader)
// evaluates the prompt, with prefix reuse as any request; the others
// (followers) wait without decoding anything, and in the step that decodes
// the leader's last prompt token each follower's KV becomes a copy of the
// leader's (llama_memory_seq_cp) and draws its first token from the same
// logits with its own sampler. From there on each is an ordinary sequence:
// its own stop strings, budget, grammar and finish reason. So the prompt
// is evaluated once, whatever n.

// checkChoices refuses an n the model's slots cannot run at once.
func checkChoices(r *Request, slots int) error {
	if r.N > slots {
		return &backends.BadRequestError{Param: "n",
			Message: fmt.Sprintf("n %d is more than the %d slots this model runs (each choice is a sequence of its own)", r.N, slots)}
	}
	return nil
}

// withChoices gives r the n-1 followers of an n-choice request: the same
// prompt, budget, stop strings, grammar and rendering, each its own stream.
// A seeded request's choice i draws with seed+i, so the choices differ and
// stay reproducible.
func (r *request) withChoices(n int) {
	for i := 1; i < n; i++ {
		f := *r
		f.followers = nil
		f.stream = newStream()
		if r.samp.Seed != nil {
			seed := *r.samp.Seed + int64(i)
			f.samp.Seed = &seed
		}
		r.followers = append(r.followers, &f)
	}
}

// group is r and its followers, in choice order.
func (r *request) group() []*request {
	return append([]*request{r}, r.followers...)
}

// endGroup ends every choice of a request that never ran with ev.
func (s *scheduler) endGroup(r *request, ev Event) {
	r.media.release()
	for _, c := range r.group() {
		s.end(c.stream, ev)
	}
}

// startGroup gives r its slot (the one sharing the longest prefix) and
// each follower an idle slot of its own; admit checked there are enough.
func (s *scheduler) startGroup(r *request) {
	if r.media != nil {
		s.startMedia(s.pickSlot(nil), r)
		return
	}
	leader := s.pickSlot(r.prompt)
	s.start(leader, r)
	for _, f := range r.followers {
		s.startFollower(s.pickSlot(nil), f, leader)
	}
}

// startFollower gives f the slot sl, to wait for leader's prompt: its KV is
// dropped now (the copy replaces it), and it reads no prompt itself.
func (s *scheduler) startFollower(sl *slot, f *request, leader *slot) {
	s.keepDropped(sl, 0)
	s.dec.seqRemove(sl.id, -1)
	sl.cache, sl.exact, sl.answer = sl.cache[:0], 0, pendingAnswer{}
	s.clock++
	sl.used, sl.base = s.clock, s.floor
	sl.r = f
	sl.nPast = len(f.prompt) // not prefilling: the leader reads the prompt
	sl.hasNext = false
	s.startSampler(sl, f)
	sl.text = newTextAssembler(f.stops)
	sl.usage = Usage{PromptTokens: len(f.prompt)}
	s.active.Add(1)
	leader.followers = append(leader.followers, sl)
}

// sharePrompts runs after a decode: a leader whose last prompt token was in
// it gives its followers a copy of its KV and the batch index of its logits,
// so that they sample this step too.
func (s *scheduler) sharePrompts() {
	for _, sl := range s.slots {
		if len(sl.followers) == 0 || sl.idle() || sl.logit < 0 || sl.prefilling() {
			continue
		}
		for _, f := range sl.followers {
			if f.idle() {
				continue
			}
			if err := s.dec.seqCopy(sl.id, f.id); err != nil {
				// The follower's KV is not the prompt's: it must not
				// sample from it. It ends with the error; the leader
				// and the other choices go on.
				s.dec.seqRemove(f.id, -1)
				f.cache, f.exact = f.cache[:0], 0
				s.finish(f, FinishError, fmt.Errorf("%w: sequence %d could not take a copy of the prompt's KV: %w", ErrDecode, f.id, err), false)
				continue
			}
			f.cache = append(f.cache[:0], sl.cache...)
			f.exact = sl.exact
			f.logit = sl.logit
			f.usage.CachedTokens = sl.usage.CachedTokens
		}
		sl.followers = nil
	}
}

// mergeChoices is the one stream of an n-choice generation: every event of
// choice i with Index i, each choice ending with its own final event, closed
// after the last.
func mergeChoices(ins []<-chan Event) <-chan Event {
	out := make(chan Event)
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range in {
				ev.Index = i
				out <- ev
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}
