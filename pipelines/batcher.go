package pipelines

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modeld/modeld/backends"
)

// ErrBatcherClosed is returned by a Batcher that has been closed.
var ErrBatcherClosed = backends.NewKind("pipelines: batcher closed", http.StatusServiceUnavailable, "model_busy")

// ErrBusy is returned when a batcher's queue is full. A loaded pipeline's
// batcher queues MaxInFlight requests, as many as the cache lets call it at
// once, so behind the cache it never answers ErrBusy: the cache is the one
// admission point of a model, and refuses with a retry-after.
var ErrBusy = backends.NewKind("pipelines: too many queued requests", http.StatusServiceUnavailable, "model_busy")

// MaxInFlight is the most requests a loaded pipeline serves at once: its
// slots in the cache (cmd/modeld's pipeline instance reports it) and the
// queue of its batcher. Each request makes at most one batcher call at a
// time, so the batcher holds every request the cache admitted.
const MaxInFlight = 64

// Cost is what one request adds to a forward pass: Seqs sequences, the longest
// MaxLen tokens. A batch costs (total sequences) × (longest sequence) padded tokens,
// which is what the model computes.
type Cost struct {
	Seqs, MaxLen int
}

// BatcherConfig sets a Batcher's limits.
type BatcherConfig struct {
	// TokenBudget bounds the padded tokens of one merged forward pass. A request
	// larger than the budget on its own still runs, alone.
	TokenBudget int
	// Wait is how long a batch of fewer than selfBatchSeqs sequences is held for
	// others to join: on an idle batcher from its first request, after a pass from
	// the pass's end; when requests joined within the window, it waits another,
	// up to maxWindows in all, but no longer once as many requests as the last
	// pass answered (when that was selfBatchSeqs or more) are back. A larger
	// batch, or one that queued behind a full pass, runs as soon as the forward
	// pass is free; so does a lone caller's request once a window has passed
	// with no one joining it, until a request queues behind a pass again.
	Wait time.Duration
	// QueueLimit bounds the requests waiting for a forward pass; one more fails with
	// ErrBusy at once. 0 means MaxInFlight.
	QueueLimit int
}

// selfBatchSeqs is the number of sequences from which a batch is worth a
// forward pass of its own: the batcher runs it without the wait window (a pass
// of 8 short sequences costs about as much per sequence as one of 32; one of 1
// to 4, 1.3 to 2 times as much).
const selfBatchSeqs = 8

// maxWindows bounds the wait windows of one batch: requests that keep arriving
// extend its wait up to this many times Wait.
const maxWindows = 4

// Batcher merges concurrent requests into one forward pass and splits the results
// back (dynamic batching). Run gets the requests of one batch, in arrival order, and
// must return one result per request. Batches run one at a time.
//
// Lock order: mu guards closed and the send into the queue (so that nothing enters
// the queue after Close drained it); it is never held while Run executes.
type Batcher[Q, R any] struct {
	cfg  BatcherConfig
	run  func(ctx context.Context, reqs []Q) ([]R, error)
	cost func(Q) Cost

	hooks batcherHooks

	calls chan *call[Q, R]
	quit  chan struct{}
	done  chan struct{}
	ctx   context.Context
	stop  context.CancelFunc

	mu     sync.Mutex
	closed bool
}

type call[Q, R any] struct {
	ctx  context.Context
	req  Q
	cost Cost
	resp R
	err  error
	done chan struct{}
}

// NewBatcher starts a batcher; Close stops it.
func NewBatcher[Q, R any](cfg BatcherConfig, cost func(Q) Cost, run func(ctx context.Context, reqs []Q) ([]R, error)) *Batcher[Q, R] {
	return newBatcher(cfg, cost, run, batcherHooks{})
}

// batcherHooks are seams for tests: enqueued is told
// when a request entered the queue; joined is told the size of the forming batch
// each time a request joins it.
type batcherHooks struct {
	enqueued func()
	joined   func(n int)
}

func newBatcher[Q, R any](cfg BatcherConfig, cost func(Q) Cost, run func(ctx context.Context, reqs []Q) ([]R, error), hooks batcherHooks) *Batcher[Q, R] {
	if cfg.QueueLimit <= 0 {
		cfg.QueueLimit = MaxInFlight
	}
	if hooks.enqueued == nil {
		hooks.enqueued = func() {}
	}
	if hooks.joined == nil {
		hooks.joined = func(int) {}
	}
	ctx, stop := context.WithCancel(context.Background())
	b := &Batcher[Q, R]{
		cfg: cfg, run: run, cost: cost, hooks: hooks,
		calls: make(chan *call[Q, R], cfg.QueueLimit), quit: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, stop: stop,
	}
	go b.loop()
	return b
}

// Do queues req, waits for the batch it joins to run, and returns its result. A full
// queue fails at once with ErrBusy. A cancelled ctx returns at once; a request
// cancelled before its batch starts is left out of the batch.
func (b *Batcher[Q, R]) Do(ctx context.Context, req Q) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[Q, R]{ctx: ctx, req: req, cost: b.cost(req), done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrBatcherClosed
	}
	select {
	case b.calls <- c:
	default:
		b.mu.Unlock()
		return zero, ErrBusy
	}
	b.mu.Unlock()
	b.hooks.enqueued()
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Close stops the batcher: queued requests fail with ErrBatcherClosed, a running
// batch is cancelled, and Close waits for the loop to end.
func (b *Batcher[Q, R]) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.quit)
		b.stop()
	}
	b.mu.Unlock()
	<-b.done
}

func (b *Batcher[Q, R]) loop() {
	defer close(b.done)
	var carry []*call[Q, R]
	overflow := false // carry is a request that a full batch left out
	answered := 0     // requests the last pass answered
	// lonely: the last window passed with no one joining and nothing has queued
	// behind a pass since; a lone caller's next request does not wait.
	lonely := false
	for {
		var batch []*call[Q, R]
		mayWait := true
		if len(carry) == 0 {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			case <-b.quit:
				b.drain()
				return
			}
			mayWait = !lonely
		} else {
			// A request left out of a full batch runs next without waiting:
			// more are queued behind it.
			batch, carry, mayWait = carry, nil, !overflow
			lonely = false
		}
		b.hooks.joined(len(batch))
		// After a pass that answered a batch's worth of callers, the wait ends as
		// soon as as many requests are back: nobody else is expected.
		back := 0
		if answered >= selfBatchSeqs {
			back = answered
		}
		if !b.collect(&batch, &carry, nil, 0) {
			return
		}
		// A batch of a few sequences waits for company: on an idle pipeline for
		// concurrent callers to arrive, after a pass for the callers it just
		// answered to come back, so that their requests do not alternate
		// between a large pass and a small, costly one. While requests keep
		// joining it waits another window, up to maxWindows.
		if carry == nil && mayWait && b.cfg.Wait > 0 && seqs(batch) < selfBatchSeqs {
			for range maxWindows {
				before := len(batch)
				if !b.collect(&batch, &carry, time.After(b.cfg.Wait), back) {
					return
				}
				if len(batch) == before || carry != nil || b.full(batch) || back > 0 && len(batch) >= back {
					break
				}
			}
			lonely = len(batch) == 1
		}
		overflow = carry != nil
		answered = b.execute(batch)
		select {
		case <-b.quit:
			b.fail(carry)
			b.drain()
			return
		default:
		}
		if carry == nil {
			// Requests that queued while the pass ran start the next batch.
			select {
			case c := <-b.calls:
				carry = []*call[Q, R]{c}
			default:
			}
		}
	}
}

// collect adds queued requests to *batch until it is full, a request does not
// fit (that one goes to *carry), or it holds enough requests (when enough > 0).
// With timer nil it takes only what is queued now; else it also waits for more
// until the timer fires. It returns false when the batcher closed meanwhile,
// having failed the batch and the queue.
func (b *Batcher[Q, R]) collect(batch, carry *[]*call[Q, R], timer <-chan time.Time, enough int) bool {
	for *carry == nil && !b.full(*batch) && (enough == 0 || len(*batch) < enough) {
		if timer == nil {
			select {
			case c := <-b.calls:
				*batch, *carry = b.add(*batch, c)
			case <-b.quit:
				b.fail(*batch)
				b.drain()
				return false
			default:
				return true
			}
			continue
		}
		select {
		case c := <-b.calls:
			*batch, *carry = b.add(*batch, c)
		case <-timer:
			return true
		case <-b.quit:
			b.fail(*batch)
			b.drain()
			return false
		}
	}
	return true
}

func seqs[Q, R any](batch []*call[Q, R]) int {
	n := 0
	for _, c := range batch {
		n += c.cost.Seqs
	}
	return n
}

// drain fails the requests still queued after close.
func (b *Batcher[Q, R]) drain() {
	for {
		select {
		case c := <-b.calls:
			b.fail([]*call[Q, R]{c})
		default:
			return
		}
	}
}

// add appends c when it fits the budget, else returns it as the carry for the next
// batch.
func (b *Batcher[Q, R]) add(batch []*call[Q, R], c *call[Q, R]) ([]*call[Q, R], []*call[Q, R]) {
	if padded(append(batch[:len(batch):len(batch)], c)) > b.cfg.TokenBudget {
		return batch, []*call[Q, R]{c}
	}
	batch = append(batch, c)
	b.hooks.joined(len(batch))
	return batch, nil
}

func (b *Batcher[Q, R]) full(batch []*call[Q, R]) bool {
	return padded(batch) >= b.cfg.TokenBudget
}

func padded[Q, R any](batch []*call[Q, R]) int {
	seqs, longest := 0, 0
	for _, c := range batch {
		seqs += c.cost.Seqs
		longest = max(longest, c.cost.MaxLen)
	}
	return seqs * longest
}

// execute runs the batch's live requests and returns how many it answered.
func (b *Batcher[Q, R]) execute(batch []*call[Q, R]) int {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return 0
	}
	reqs := make([]Q, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	resps, err := b.run(b.ctx, reqs)
	if err == nil && len(resps) != len(live) {
		err = errors.New("pipelines: batch returned the wrong number of results")
	}
	for i, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.resp = resps[i]
		}
		close(c.done)
	}
	return len(live)
}

func (b *Batcher[Q, R]) fail(batch []*call[Q, R]) {
	for _, c := range batch {
		c.err = ErrBatcherClosed
		close(c.done)
	}
}
