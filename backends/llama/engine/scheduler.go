package engine

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/promptcache"
)

// Hooks are test seams (OpenWithHooks), called on the scheduler goroutine
// unless said otherwise.
type Hooks struct {
	// AfterToken runs after a token of the request in slot was handled; n
	// is that request's completion token count so far.
	AfterToken func(slot, n int)
	// TokenizedPiece runs after each piece of a long text was tokenized
	// (tokenize_chunks.go), on the caller's goroutine; n is the piece's
	// size in bytes.
	TokenizedPiece func(n int)
}

// scheduler runs continuous batching over one llama context: one sequence
// per slot, each step one decode carrying the next token of every
// generating sequence plus prompt chunks of the ones still reading their
// prompt. Requests wait in a FIFO when every slot is busy.
type scheduler struct {
	dec     decoder
	batch   []batchToken // the step being built
	nBatch  int
	ctxSize int
	slots   []*slot
	hooks   Hooks
	clock   uint64 // loop goroutine only
	// floor is the value of the last cached prefix a request evicted
	// (slot.go's GreedyDual-Size); loop goroutine only.
	floor uint64

	mu         sync.Mutex // guards waiting and closed
	waiting    []*request
	closed     bool
	maxWaiting int

	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	active        atomic.Int64
	decodeCalls   atomic.Uint64
	decodedTokens atomic.Uint64
	// kvTokens is the KV the running sequences hold (loop goroutine
	// writes, stats reads); the rest count ended generations.
	kvTokens         atomic.Int64
	promptTokens     atomic.Uint64
	completionTokens atomic.Uint64
	generations      atomic.Uint64
	cancelled        atomic.Uint64
	// prefixQueried and prefixHit count the prompt tokens of requests given
	// a slot and those of them its KV held (start).
	prefixQueried atomic.Uint64
	prefixHit     atomic.Uint64

	// disk is the on-disk prompt cache (promptcache.go; nil: none);
	// diskSaved counts the prefixes handed to it, diskRestored the prompt
	// tokens its entries gave.
	disk         *promptcache.Cache
	diskSaved    atomic.Uint64
	diskRestored atomic.Uint64
	// Prompt lookup (speculate.go): the most tokens a step drafts for a
	// sequence (0: off unless a request asks, -1: the model cannot), each
	// sequence's state, and the counters.
	lookup                              int
	spec                                []specSeq
	drafts, draftTokens, acceptedTokens atomic.Uint64
	// reuseAnswers: idle slots' answers are evaluated again so that the
	// next turn reuses them (answers.go); reevaluated counts those tokens.
	reuseAnswers bool
	answerDelay  time.Duration
	reevaluated  atomic.Uint64
}

func newScheduler(m *Model, o Options, h Hooks) (*scheduler, error) {
	nBatch := max(o.BatchSize, o.Slots)
	// The prompt cache opens first: its newest entry is read while the
	// KV cache is allocated and cleared (promptcache.go, prime), as are
	// the vocabulary's tables (vocab_ahead.go).
	disk := openPromptCache(m, o, m.info.ContextSize)
	if disk != nil {
		if name := disk.Newest(); name != "" {
			disk.Prefetch(name)
		}
	}
	vocab := startVocab(m)
	dec, err := newLlamaDecoder(m, o, nBatch, m.info.ContextSize)
	if err != nil {
		<-vocab
		if disk != nil {
			_ = disk.Close(context.Background())
		}
		return nil, err
	}
	dec.lazy.ahead = vocab
	s := newSchedulerWith(dec, o.Slots, nBatch, m.info.ContextSize, o.MaxWaiting, h)
	s.disk = disk
	recurrent := yz.ModelIsRecurrent(m.model) || yz.ModelIsHybrid(m.model)
	s.lookup = lookupMax(o, recurrent)
	s.reuseAnswers = o.ReuseAnswers && !recurrent // a recurrent state cannot drop its tail
	return s, nil
}

// newSchedulerWith makes a scheduler over dec with slots sequences of
// ctxSize tokens, nBatch tokens per step and at most maxWaiting requests
// waiting (0: no bound). Its loop is not started.
func newSchedulerWith(dec decoder, slots, nBatch, ctxSize, maxWaiting int, h Hooks) *scheduler {
	s := &scheduler{
		dec: dec, batch: make([]batchToken, 0, nBatch),
		nBatch: nBatch, ctxSize: ctxSize, hooks: h, maxWaiting: maxWaiting,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		answerDelay: answerDelay,
	}
	for i := 0; i < slots; i++ {
		s.slots = append(s.slots, &slot{id: i, logit: -1})
	}
	s.spec = make([]specSeq, slots)
	return s
}

// submit queues r for a slot.
func (s *scheduler) submit(r *request) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	idle := len(s.slots) - int(s.active.Load())
	if s.maxWaiting > 0 && len(s.waiting)-idle >= s.maxWaiting {
		n := len(s.waiting)
		s.mu.Unlock()
		return &backends.BusyError{
			Reason:     fmt.Sprintf("llama: all %d slots are in use and %d requests wait, the most allowed", len(s.slots), n),
			RetryAfter: time.Second,
		}
	}
	s.waiting = append(s.waiting, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

func (s *scheduler) stats() Stats {
	s.mu.Lock()
	waiting := len(s.waiting)
	s.mu.Unlock()
	return Stats{
		Slots: len(s.slots), Active: int(s.active.Load()), Waiting: waiting,
		DecodeCalls: s.decodeCalls.Load(), DecodedTokens: s.decodedTokens.Load(),
		KVTokens: int(s.kvTokens.Load()), KVCapacity: len(s.slots) * s.ctxSize,
		PromptTokens: s.promptTokens.Load(), CompletionTokens: s.completionTokens.Load(),
		Generations: s.generations.Load(), Cancelled: s.cancelled.Load(),
		PrefixQueryTokens: s.prefixQueried.Load(), PrefixHitTokens: s.prefixHit.Load(),
		Drafts: s.drafts.Load(), DraftTokens: s.draftTokens.Load(), AcceptedTokens: s.acceptedTokens.Load(),
		ReevaluatedTokens: s.reevaluated.Load(),
	}
}

// end sends a generation's last event and counts it.
func (s *scheduler) end(st *stream, ev Event) {
	s.promptTokens.Add(uint64(ev.Usage.PromptTokens))
	s.completionTokens.Add(uint64(ev.Usage.CompletionTokens))
	s.generations.Add(1)
	if ev.Finish == FinishCancelled {
		s.cancelled.Add(1)
	}
	st.end(ev)
}

// noteKV records the KV held by the running sequences (loop goroutine).
func (s *scheduler) noteKV() {
	n := 0
	for _, sl := range s.slots {
		if !sl.idle() {
			n += len(sl.cache)
		}
	}
	s.kvTokens.Store(int64(n))
}

// stop ends the loop and frees the context; safe to call more than once.
func (s *scheduler) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.quit)
	})
	<-s.done
}

func (s *scheduler) loop() {
	// Keep llama.cpp's calls on one OS thread (GPU backends hold
	// per-thread state).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			s.shutdown()
			return
		default:
		}
		s.admit()
		s.reapCancelled()
		if s.active.Load() == 0 {
			if s.reuseAnswerStep() {
				continue
			}
			due, stopWait := s.answerWait()
			select {
			case <-s.wake:
			case <-s.diskAhead():
				s.prime()
			case <-due:
			case <-s.quit:
				stopWait()
				s.shutdown()
				return
			}
			stopWait()
			continue
		}
		s.step()
	}
}

// admit moves waiting requests into idle slots, oldest first; a request of
// n choices waits, and holds the queue, until n slots are idle.
func (s *scheduler) admit() {
	for {
		s.mu.Lock()
		if len(s.waiting) == 0 || len(s.slots)-int(s.active.Load()) < 1+len(s.waiting[0].followers) {
			s.mu.Unlock()
			return
		}
		r := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.mu.Unlock()
		if r.ctx.Err() != nil {
			s.endGroup(r, Event{Token: -1, Done: true, Finish: FinishCancelled,
				Usage: Usage{PromptTokens: len(r.prompt)}})
			continue
		}
		s.startGroup(r)
	}
}

// reapCancelled ends the requests whose context is done, running or waiting.
func (s *scheduler) reapCancelled() {
	for _, sl := range s.slots {
		if !sl.idle() && sl.r.ctx.Err() != nil {
			s.finish(sl, FinishCancelled, nil, false)
		}
	}
	s.mu.Lock()
	var gone []*request
	s.waiting = slices.DeleteFunc(s.waiting, func(r *request) bool {
		if r.ctx.Err() != nil {
			gone = append(gone, r)
			return true
		}
		return false
	})
	s.mu.Unlock()
	for _, r := range gone {
		s.endGroup(r, Event{Token: -1, Done: true, Finish: FinishCancelled,
			Usage: Usage{PromptTokens: len(r.prompt)}})
	}
}

// step builds one batch (generating tokens first, each with its draft,
// then prompt chunks in admission order), decodes it and samples every
// sequence that got logits.
func (s *scheduler) step() {
	s.batch = s.batch[:0]
	generating := 0
	for _, sl := range s.slots {
		if !sl.idle() && sl.hasNext {
			generating++
		}
	}
	left := generating
	for _, sl := range s.slots {
		sl.before = len(sl.cache)
		sl.logit = -1
		if sl.idle() || !sl.hasNext {
			continue
		}
		sl.logit = int32(len(s.batch))
		s.add(sl.next, len(sl.cache), sl, true)
		sl.cache = append(sl.cache, sl.next)
		sl.hasNext = false
		left--
		if s.lookup >= 0 {
			s.addDraft(sl, s.nBatch-len(s.batch)-left, generating)
		}
	}
	var reading []*slot
	for _, sl := range s.slots {
		if sl.prefilling() {
			reading = append(reading, sl)
		}
	}
	slices.SortFunc(reading, func(a, b *slot) int { return cmp.Compare(a.used, b.used) })
	budget := s.nBatch - len(s.batch)
	for _, sl := range reading {
		if budget == 0 {
			break
		}
		n := min(budget, len(sl.r.prompt)-sl.nPast)
		for p := sl.nPast; p < sl.nPast+n; p++ {
			last := p == len(sl.r.prompt)-1
			if last {
				sl.logit = int32(len(s.batch))
			}
			s.add(sl.r.prompt[p], p, sl, last)
		}
		sl.cache = append(sl.cache, sl.r.prompt[sl.nPast:sl.nPast+n]...)
		sl.nPast += n
		budget -= n
	}
	ntok := uint64(len(s.batch))
	for _, sl := range s.slots {
		if ntok >= 2 && sl.exact == sl.before {
			sl.exact = len(sl.cache)
		}
	}
	s.noteKV()
	err := s.dec.decode(s.batch)
	s.decodeCalls.Add(1)
	s.decodedTokens.Add(ntok)
	if err != nil {
		s.failBatch(err)
		return
	}
	s.sharePrompts()
	for _, sl := range s.slots {
		if sl.logit >= 0 && !sl.idle() {
			s.sampleStep(sl)
		}
	}
}

func (s *scheduler) add(tok yz.Token, pos int, sl *slot, logits bool) {
	s.batch = append(s.batch, batchToken{tok: tok, pos: pos, seq: sl.id, logits: logits})
}

// failBatch ends every request that had tokens in the failed batch and
// drops its sequence's KV, whose state is unknown now.
func (s *scheduler) failBatch(err error) {
	for _, sl := range s.slots {
		if sl.idle() {
			continue
		}
		s.dec.seqRemove(sl.id, -1)
		sl.cache, sl.exact = sl.cache[:0], 0
		s.finish(sl, FinishError, err, false)
	}
}

// shutdown ends every request with ErrClosed and frees the context.
func (s *scheduler) shutdown() {
	for _, sl := range s.slots {
		if !sl.idle() {
			s.finish(sl, FinishError, ErrClosed, false)
		}
	}
	s.mu.Lock()
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, r := range waiting {
		s.endGroup(r, Event{Token: -1, Done: true, Finish: FinishError, Err: ErrClosed,
			Usage: Usage{PromptTokens: len(r.prompt)}})
	}
	s.saveAll()
	s.dec.close()
}
