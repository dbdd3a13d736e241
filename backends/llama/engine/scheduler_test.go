package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// fakeDecoder is a decoder without libllama: it records the batches,
// samples token 7 for every sequence (never the end of generation), and
// can hold a decode until the test lets it go.
type fakeDecoder struct {
	mu      sync.Mutex
	batches [][]batchToken

	// entered, when set, gets a value as each decode starts; the decode
	// then waits for gate (when set) to be closed.
	entered chan int
	gate    chan struct{}
	// onDecode runs inside decode n (from 1) with its batch.
	onDecode func(n int, batch []batchToken)

	seqs   map[int]bool // sequences with a sampler
	closed bool
}

func newFakeDecoder() *fakeDecoder { return &fakeDecoder{seqs: map[int]bool{}} }

func (d *fakeDecoder) decode(batch []batchToken) error {
	d.mu.Lock()
	d.batches = append(d.batches, append([]batchToken(nil), batch...))
	n := len(d.batches)
	d.mu.Unlock()
	if d.entered != nil {
		d.entered <- n
	}
	if d.gate != nil {
		<-d.gate
	}
	if d.onDecode != nil {
		d.onDecode(n, batch)
	}
	return nil
}

func (d *fakeDecoder) sample(seq int, i int32) yz.Token { return 7 }
func (d *fakeDecoder) startSeq(seq int, _ Sampling, _ constraint) {
	d.mu.Lock()
	d.seqs[seq] = true
	d.mu.Unlock()
}
func (d *fakeDecoder) endSeq(seq int) {
	d.mu.Lock()
	delete(d.seqs, seq)
	d.mu.Unlock()
}
func (d *fakeDecoder) seqRemove(int, int) bool   { return true }
func (d *fakeDecoder) isEOG(tok yz.Token) bool   { return tok == 2 }
func (d *fakeDecoder) piece(tok yz.Token) string { return "x" }
func (d *fakeDecoder) close()                    { d.closed = true }

// promptTokens counts the prompt tokens of seq decoded so far (tokens other
// than the sampled 7).
func (d *fakeDecoder) promptTokens(seq int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, b := range d.batches {
		for _, t := range b {
			if t.seq == seq && t.tok != 7 {
				n++
			}
		}
	}
	return n
}

// startFake runs a scheduler over dec; it stops at the end of the test.
func startFake(t *testing.T, dec *fakeDecoder, slots, nBatch, maxWaiting int) *scheduler {
	t.Helper()
	s := newSchedulerWith(dec, slots, nBatch, 1<<20, maxWaiting, Hooks{})
	go s.loop()
	t.Cleanup(func() {
		if dec.gate != nil {
			select {
			case <-dec.gate:
			default:
				close(dec.gate)
			}
		}
		s.stop()
		if !dec.closed {
			t.Error("the scheduler did not close its decoder")
		}
	})
	return s
}

// submitFake submits a prompt of n tokens (ids 10..) with a completion
// budget and returns the stream's events channel.
func submitFake(t *testing.T, s *scheduler, ctx context.Context, n, budget int) (<-chan Event, error) {
	t.Helper()
	prompt := make([]yz.Token, n)
	for i := range prompt {
		prompt[i] = yz.Token(10 + i)
	}
	r := &request{ctx: ctx, prompt: prompt, budget: budget, samp: Sampling{}, stream: newStream()}
	if err := s.submit(r); err != nil {
		return nil, err
	}
	go r.stream.pump()
	return r.stream.out, nil
}

// last reads a stream to its end and returns its final event.
func last(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	var ev Event
	n := 0
	for e := range ch {
		ev = e
		n++
	}
	if n == 0 || !ev.Done {
		t.Fatalf("stream ended without a final event (%d events)", n)
	}
	return ev
}

// TestSchedulerQueuesWhenSlotsFull: with every slot busy a request waits in
// the queue, and runs once a slot is free.
func TestSchedulerQueuesWhenSlotsFull(t *testing.T) {
	dec := newFakeDecoder()
	dec.entered, dec.gate = make(chan int, 64), make(chan struct{})
	s := startFake(t, dec, 1, 8, 0)
	first, err := submitFake(t, s, context.Background(), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	<-dec.entered // the first request holds the only slot, mid-decode
	second, err := submitFake(t, s, context.Background(), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.stats(); st.Active != 1 || st.Waiting != 1 {
		t.Fatalf("stats while the slot is busy = %+v, want 1 active and 1 waiting", st)
	}
	close(dec.gate)
	for i, ch := range []<-chan Event{first, second} {
		if ev := last(t, ch); ev.Finish != FinishLength || ev.Usage.CompletionTokens != 2 || ev.Usage.PromptTokens != 3 {
			t.Errorf("request %d ended with %+v", i, ev)
		}
	}
}

// TestSchedulerQueueLimit: beyond the queue limit a request is refused at
// once with a busy error that says when to retry.
func TestSchedulerQueueLimit(t *testing.T) {
	dec := newFakeDecoder()
	dec.entered, dec.gate = make(chan int, 64), make(chan struct{})
	s := startFake(t, dec, 1, 8, 1)
	running, err := submitFake(t, s, context.Background(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-dec.entered
	queued, err := submitFake(t, s, context.Background(), 3, 1)
	if err != nil {
		t.Fatalf("the first waiting request was refused: %v", err)
	}
	_, err = submitFake(t, s, context.Background(), 3, 1)
	var be *backends.BusyError
	if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || be.RetryAfterDuration() < time.Second {
		t.Fatalf("over the queue limit: %v, want a *backends.BusyError with a retry-after", err)
	}
	close(dec.gate)
	last(t, running)
	last(t, queued)
}

// TestSchedulerCancelFreesSlot: a cancelled running request ends with
// FinishCancelled and its slot goes to the next waiting request.
func TestSchedulerCancelFreesSlot(t *testing.T) {
	dec := newFakeDecoder()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dec.onDecode = func(n int, _ []batchToken) {
		if n == 3 {
			cancel()
		}
	}
	s := startFake(t, dec, 1, 8, 0)
	long, err := submitFake(t, s, ctx, 3, 1<<19)
	if err != nil {
		t.Fatal(err)
	}
	next, err := submitFake(t, s, context.Background(), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ev := last(t, long); ev.Finish != FinishCancelled {
		t.Fatalf("cancelled request ended with %+v", ev)
	}
	if ev := last(t, next); ev.Finish != FinishLength || ev.Usage.CompletionTokens != 2 {
		t.Fatalf("the waiting request ended with %+v", ev)
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	if len(dec.seqs) != 0 {
		t.Errorf("samplers left after both requests ended: %v", dec.seqs)
	}
}

// TestSchedulerCancelMidPrefill: a request cancelled while its prompt is
// read in chunks is not read further: no chunk of it is decoded after the
// cancellation.
func TestSchedulerCancelMidPrefill(t *testing.T) {
	dec := newFakeDecoder()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dec.onDecode = func(n int, _ []batchToken) {
		if n == 2 {
			cancel()
		}
	}
	s := startFake(t, dec, 1, 4, 0)
	ch, err := submitFake(t, s, ctx, 40, 5)
	if err != nil {
		t.Fatal(err)
	}
	ev := last(t, ch)
	if ev.Finish != FinishCancelled || ev.Usage.CompletionTokens != 0 {
		t.Fatalf("ended with %+v, want cancelled before any token", ev)
	}
	if got := dec.promptTokens(0); got != 8 {
		t.Fatalf("%d prompt tokens decoded, want the 2 chunks of 4 read before the cancellation", got)
	}
}

// TestSchedulerGeneratingFirst: in a step, generating sequences get their
// token before prompt chunks, so a long prompt does not stall the others.
func TestSchedulerGeneratingFirst(t *testing.T) {
	dec := newFakeDecoder()
	// The first decode waits until both requests are in: else the short one
	// could finish before the long one arrives.
	dec.gate = make(chan struct{})
	s := startFake(t, dec, 2, 4, 0)
	short, err := submitFake(t, s, context.Background(), 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	long, err := submitFake(t, s, context.Background(), 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	close(dec.gate)
	last(t, short)
	last(t, long)
	dec.mu.Lock()
	defer dec.mu.Unlock()
	mixed := 0
	for i, b := range dec.batches {
		seenPrompt, seenGen := false, false
		for _, tk := range b {
			if tk.tok != 7 {
				seenPrompt = true
			} else {
				seenGen = true
			}
			if tk.tok == 7 && seenPrompt {
				t.Fatalf("batch %d puts a generated token after a prompt chunk: %+v", i, b)
			}
		}
		if len(b) > 4 {
			t.Fatalf("batch %d has %d tokens, more than the batch size 4", i, len(b))
		}
		if seenPrompt && seenGen {
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatal("no step carried a generated token and a prompt chunk together")
	}
}

// TestSchedulerStatsKVAndCounters: Stats counts the KV that running
// sequences hold against the context's capacity (an idle slot's kept KV is
// free), the tokens, generations and cancellations of ended requests, and
// the prompt tokens looked up in and read from the prefix cache of the
// requests given a slot.
func TestSchedulerStatsKVAndCounters(t *testing.T) {
	dec := newFakeDecoder()
	dec.entered, dec.gate = make(chan int, 64), make(chan struct{})
	s := startFake(t, dec, 2, 8, 0)
	ch, err := submitFake(t, s, context.Background(), 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	<-dec.entered // the prompt's 3 tokens are in the step being decoded
	if st := s.stats(); st.KVTokens != 3 || st.KVCapacity != 2<<20 || st.Generations != 0 {
		t.Fatalf("stats during the prompt = %+v, want 3 KV tokens of %d and no generation ended", st, 2<<20)
	}
	close(dec.gate)
	if ev := last(t, ch); ev.Finish != FinishLength {
		t.Fatalf("request ended with %+v", ev)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone, err := submitFake(t, s, ctx, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	if ev := last(t, gone); ev.Finish != FinishCancelled {
		t.Fatalf("cancelled request ended with %+v", ev)
	}
	// The first prompt again: its KV is reused but for the last two tokens,
	// which are evaluated for the logits.
	again, err := submitFake(t, s, context.Background(), 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	if ev := last(t, again); ev.Usage.CachedTokens != 1 {
		t.Fatalf("the prompt again ended with %+v, want 1 cached token", ev)
	}
	want := Stats{Slots: 2, KVCapacity: 2 << 20, PromptTokens: 10, CompletionTokens: 10, Generations: 3, Cancelled: 1,
		PrefixQueryTokens: 6, PrefixHitTokens: 1}
	st := s.stats()
	st.DecodeCalls, st.DecodedTokens = 0, 0
	if st != want {
		t.Fatalf("stats after both ended = %+v, want %+v", st, want)
	}
}
