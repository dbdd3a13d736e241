package pipelines

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The tests run inside synctest bubbles: a wait window ends when the bubble's clock
// reaches it, and the clock moves only once every goroutine of the bubble is blocked,
// so a window ends exactly when nothing else can happen, and time.Since a moment of
// the test says how many windows passed since.

type recorder struct {
	mu      sync.Mutex
	batches [][]string
	started chan []string
	release chan struct{}
	err     error
}

func (r *recorder) run(_ context.Context, reqs []string) ([]string, error) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]string(nil), reqs...))
	r.mu.Unlock()
	if r.started != nil {
		r.started <- reqs
	}
	if r.release != nil {
		<-r.release
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([]string, len(reqs))
	for i, q := range reqs {
		out[i] = "done:" + q
	}
	return out, nil
}

// cost: one sequence of len(q) tokens.
func strCost(q string) Cost { return Cost{Seqs: 1, MaxLen: len(q)} }

type result struct {
	req, resp string
	err       error
}

func submit(b *Batcher[string, string], ctx context.Context, q string, out chan<- result) {
	go func() {
		r, err := b.Do(ctx, q)
		out <- result{q, r, err}
	}()
}

func TestBatcherMergesWithinWindow(t *testing.T) {
	synctest.Test(t, testBatcherMergesWithinWindow)
}

func testBatcherMergesWithinWindow(t *testing.T) {
	sizes := make(chan int, 16)
	rec := &recorder{}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Millisecond}, strCost, rec.run,
		batcherHooks{joined: func(n int) { sizes <- n }})
	defer b.Close()

	out := make(chan result, 3)
	for _, q := range []string{"aa", "bb", "cc"} {
		submit(b, context.Background(), q, out)
	}
	for n := 0; n < 3; {
		n = <-sizes
	}
	got := map[string]string{}
	for range 3 {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		got[r.req] = r.resp
	}
	for _, q := range []string{"aa", "bb", "cc"} {
		if got[q] != "done:"+q {
			t.Errorf("%s -> %q", q, got[q])
		}
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != 3 {
		t.Fatalf("batches = %v, want one batch of 3", rec.batches)
	}
}

func TestBatcherFlushesWhenBudgetFull(t *testing.T) {
	synctest.Test(t, testBatcherFlushesWhenBudgetFull)
}

func testBatcherFlushesWhenBudgetFull(t *testing.T) {
	rec := &recorder{started: make(chan []string, 4)}
	// Budget 8 padded tokens: "aaaaa" (5) and "bbbbb" (5) cannot share a pass.
	b := newBatcher(BatcherConfig{TokenBudget: 8, Wait: time.Hour}, strCost, rec.run, batcherHooks{})
	defer b.Close()
	out := make(chan result, 2)
	submit(b, context.Background(), "aaaaa", out)
	synctest.Wait() // the first request waits for company
	start := time.Now()
	submit(b, context.Background(), "bbbbb", out)
	// No timer fires: the second request overflows the budget, so the first runs now
	// and the second follows without a new window.
	if got := <-rec.started; fmt.Sprint(got) != "[aaaaa]" {
		t.Fatalf("first batch = %v", got)
	}
	if got := <-rec.started; fmt.Sprint(got) != "[bbbbb]" {
		t.Fatalf("second batch = %v", got)
	}
	for range 2 {
		if r := <-out; r.err != nil || r.resp != "done:"+r.req {
			t.Fatalf("result %+v", r)
		}
	}
	if waited := time.Since(start); waited != 0 {
		t.Fatalf("the requests waited %v: the carried-over one waited for a new window", waited)
	}
}

// gatedBatcher is a batcher with windows of an hour (call it inside a synctest
// bubble) that signals queued for every request entering its queue and runs
// each pass when the test sends on rec.release.
func gatedBatcher(t *testing.T) (chan struct{}, *recorder, *Batcher[string, string]) {
	queued := make(chan struct{}, 16)
	rec := &recorder{started: make(chan []string, 4), release: make(chan struct{})}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run,
		batcherHooks{enqueued: func() { queued <- struct{}{} }})
	t.Cleanup(b.Close)
	return queued, rec, b
}

func TestBatcherBacklogRunsWithoutWaiting(t *testing.T) {
	synctest.Test(t, testBatcherBacklogRunsWithoutWaiting)
}

func testBatcherBacklogRunsWithoutWaiting(t *testing.T) {
	queued, rec, b := gatedBatcher(t)
	backlog := []string{"b", "c", "d", "e", "f", "g", "h", "i"} // selfBatchSeqs of them
	out := make(chan result, 1+len(backlog))
	submit(b, context.Background(), "a", out)
	<-queued
	<-rec.started // batch [a] is running after its window; the backlog queues behind it
	for _, q := range backlog {
		submit(b, context.Background(), q, out)
		<-queued
	}
	start := time.Now()
	rec.release <- struct{}{}
	if got := <-rec.started; len(got) != len(backlog) {
		t.Fatalf("backlog batch = %v, want all %d together", got, len(backlog))
	}
	rec.release <- struct{}{}
	for range 1 + len(backlog) {
		if r := <-out; r.err != nil || r.resp != "done:"+r.req {
			t.Fatalf("result %+v", r)
		}
	}
	if waited := time.Since(start); waited != 0 {
		t.Fatalf("a backlog worth a pass of its own waited %v for a window", waited)
	}
}

// A small backlog waits for the callers of the pass that just ended: their next
// requests join it instead of running as a second small pass.
func TestBatcherSmallBacklogWaitsForCompany(t *testing.T) {
	synctest.Test(t, testBatcherSmallBacklogWaitsForCompany)
}

func testBatcherSmallBacklogWaitsForCompany(t *testing.T) {
	queued := make(chan struct{}, 16)
	sizes := make(chan int, 16)
	rec := &recorder{started: make(chan []string, 4), release: make(chan struct{})}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run,
		batcherHooks{enqueued: func() { queued <- struct{}{} }, joined: func(n int) { sizes <- n }})
	defer b.Close()
	out := make(chan result, 3)
	submit(b, context.Background(), "a", out)
	<-queued
	<-rec.started // [a] runs after its window; b queues behind it
	submit(b, context.Background(), "b", out)
	<-queued
	for len(sizes) > 0 {
		<-sizes
	}
	rec.release <- struct{}{}
	if r := <-out; r.req != "a" || r.err != nil {
		t.Fatalf("first result %+v", r)
	}
	synctest.Wait() // [b] is small: it waits
	start := time.Now()
	submit(b, context.Background(), "a2", out) // a's caller comes back
	for n := 0; n < 2; {
		n = <-sizes
	}
	// a2 joined within the window: the batch waits one more for the rest of
	// the callers; none comes.
	if got := <-rec.started; fmt.Sprint(got) != "[b a2]" {
		t.Fatalf("second batch = %v, want [b a2]", got)
	}
	if waited := time.Since(start); waited != 2*time.Hour {
		t.Fatalf("the second batch waited %v, want the window a2 joined in and one more", waited)
	}
	rec.release <- struct{}{}
	for range 2 {
		if r := <-out; r.err != nil || r.resp != "done:"+r.req {
			t.Fatalf("result %+v", r)
		}
	}
}

func TestBatcherQueueLimit(t *testing.T) {
	synctest.Test(t, testBatcherQueueLimit)
}

func testBatcherQueueLimit(t *testing.T) {
	queued := make(chan struct{}, 16)
	rec := &recorder{started: make(chan []string, 4), release: make(chan struct{})}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour, QueueLimit: 1}, strCost, rec.run,
		batcherHooks{enqueued: func() { queued <- struct{}{} }})
	defer b.Close()
	out := make(chan result, 2)
	submit(b, context.Background(), "a", out)
	<-queued
	<-rec.started // after its window the loop holds a; the queue (1 slot) is empty
	submit(b, context.Background(), "b", out)
	<-queued
	if _, err := b.Do(context.Background(), "c"); !errors.Is(err, ErrBusy) {
		t.Fatalf("full queue: %v", err)
	}
	rec.release <- struct{}{}
	<-rec.started // [b] is small: it runs after a window of waiting for company
	rec.release <- struct{}{}
	for range 2 {
		if r := <-out; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestBatcherOversizedRequestRunsAlone(t *testing.T) {
	rec := &recorder{}
	b := NewBatcher(BatcherConfig{TokenBudget: 4, Wait: 0}, strCost, rec.run)
	defer b.Close()
	r, err := b.Do(context.Background(), "longer than the budget")
	if err != nil || r != "done:longer than the budget" {
		t.Fatalf("%q %v", r, err)
	}
}

func TestBatcherErrorReachesEveryCaller(t *testing.T) {
	synctest.Test(t, testBatcherErrorReachesEveryCaller)
}

func testBatcherErrorReachesEveryCaller(t *testing.T) {
	sizes := make(chan int, 16)
	boom := errors.New("boom")
	rec := &recorder{err: boom}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run,
		batcherHooks{joined: func(n int) { sizes <- n }})
	defer b.Close()
	out := make(chan result, 2)
	submit(b, context.Background(), "x", out)
	submit(b, context.Background(), "y", out)
	for n := 0; n < 2; {
		n = <-sizes
	}
	for range 2 {
		if r := <-out; !errors.Is(r.err, boom) {
			t.Fatalf("err = %v", r.err)
		}
	}
}

func TestBatcherSkipsCancelledRequests(t *testing.T) {
	synctest.Test(t, testBatcherSkipsCancelledRequests)
}

func testBatcherSkipsCancelledRequests(t *testing.T) {
	sizes := make(chan int, 16)
	rec := &recorder{}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run,
		batcherHooks{joined: func(n int) { sizes <- n }})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 2)
	submit(b, ctx, "gone", out)
	submit(b, context.Background(), "kept", out)
	for n := 0; n < 2; {
		n = <-sizes
	}
	cancel()
	if r := <-out; r.req != "gone" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled request: %+v", r)
	}
	if r := <-out; r.req != "kept" || r.err != nil {
		t.Fatalf("kept request: %+v", r)
	}
	if len(rec.batches) != 1 || fmt.Sprint(rec.batches[0]) != "[kept]" {
		t.Fatalf("batches = %v", rec.batches)
	}
}

func TestBatcherClose(t *testing.T) {
	synctest.Test(t, testBatcherClose)
}

func testBatcherClose(t *testing.T) {
	rec := &recorder{}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run, batcherHooks{})
	out := make(chan result, 1)
	submit(b, context.Background(), "pending", out)
	synctest.Wait() // the request waits for company
	b.Close()
	if r := <-out; !errors.Is(r.err, ErrBatcherClosed) {
		t.Fatalf("pending request: %+v", r)
	}
	if _, err := b.Do(context.Background(), "late"); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("after close: %v", err)
	}
	b.Close() // idempotent
	if len(rec.batches) != 0 {
		t.Fatalf("ran %v after close", rec.batches)
	}
}

// sizedBatcher is a batcher with windows of an hour (call it inside a synctest
// bubble) that reports the size of the forming batch on sizes and records its
// passes, which run at once.
func sizedBatcher(t *testing.T) (chan int, *recorder, *Batcher[string, string]) {
	sizes := make(chan int, 64)
	rec := &recorder{started: make(chan []string, 4)}
	b := newBatcher(BatcherConfig{TokenBudget: 100, Wait: time.Hour}, strCost, rec.run,
		batcherHooks{joined: func(n int) { sizes <- n }})
	t.Cleanup(b.Close)
	return sizes, rec, b
}

// While requests keep joining, a small batch waits window after window, up to
// maxWindows; then it runs even though more might come.
func TestBatcherWindowsExtendUpToMax(t *testing.T) {
	synctest.Test(t, testBatcherWindowsExtendUpToMax)
}

func testBatcherWindowsExtendUpToMax(t *testing.T) {
	sizes, rec, b := sizedBatcher(t)
	reqs := []string{"a", "b", "c", "d", "e"}
	out := make(chan result, len(reqs))
	start := time.Now()
	submit(b, context.Background(), reqs[0], out)
	for i := 1; i <= maxWindows; i++ {
		synctest.Wait() // window i is open
		submit(b, context.Background(), reqs[i], out)
		for n := 0; n < i+1; {
			n = <-sizes
		}
		time.Sleep(time.Hour) // window i ends
	}
	if got := <-rec.started; fmt.Sprint(got) != fmt.Sprint(reqs) {
		t.Fatalf("batch = %v, want %v", got, reqs)
	}
	if waited := time.Since(start); waited != maxWindows*time.Hour {
		t.Fatalf("the batch waited %v, want the %d windows allowed", waited, maxWindows)
	}
	for range reqs {
		if r := <-out; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// After a pass that answered a batch's worth of callers, the next batch stops
// waiting as soon as that many requests are back, without its window ending.
func TestBatcherStopsWaitingWhenCallersAreBack(t *testing.T) {
	synctest.Test(t, testBatcherStopsWaitingWhenCallersAreBack)
}

func testBatcherStopsWaitingWhenCallersAreBack(t *testing.T) {
	sizes, rec, b := sizedBatcher(t)
	out := make(chan result, 2*selfBatchSeqs)
	for i := range selfBatchSeqs {
		submit(b, context.Background(), fmt.Sprint("a", i), out)
	}
	// The first pass: all of them, once every window has ended.
	for n := 0; n < selfBatchSeqs; {
		n = <-sizes
	}
	if got := <-rec.started; len(got) != selfBatchSeqs {
		t.Fatalf("first batch = %v", got)
	}
	for range selfBatchSeqs {
		<-out
	}
	// They come back, one by one; the batch runs when the last is in, with its
	// window still open.
	submit(b, context.Background(), "b0", out)
	synctest.Wait() // b0 waits for company
	for i := 1; i < selfBatchSeqs; i++ {
		submit(b, context.Background(), fmt.Sprint("b", i), out)
	}
	select {
	case got := <-rec.started:
		if len(got) != selfBatchSeqs {
			t.Fatalf("second batch = %v, want all %d callers", got, selfBatchSeqs)
		}
	case <-time.After(time.Minute): // in the bubble, a minute passes before the window of an hour ends
		t.Fatal("the callers were all back and the batch still waited for its window")
	}
	for range selfBatchSeqs {
		if r := <-out; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// A lone caller waits one window to learn it is alone; its next requests run
// without waiting, until a request queues behind a pass.
func TestBatcherLoneCallerStopsWaiting(t *testing.T) {
	synctest.Test(t, testBatcherLoneCallerStopsWaiting)
}

func testBatcherLoneCallerStopsWaiting(t *testing.T) {
	queued, rec, b := gatedBatcher(t)
	out := make(chan result, 4)
	submit(b, context.Background(), "a1", out)
	<-queued
	<-rec.started // after a window that nobody joined
	rec.release <- struct{}{}
	<-out
	submit(b, context.Background(), "a2", out)
	<-queued
	select {
	case got := <-rec.started:
		if fmt.Sprint(got) != "[a2]" {
			t.Fatalf("batch = %v", got)
		}
	case <-time.After(time.Minute): // in the bubble, a minute passes before the window of an hour ends
		t.Fatal("a lone caller's second request waited for company")
	}
	// A second caller's request queues behind the running pass: waiting is back.
	submit(b, context.Background(), "b1", out)
	<-queued
	rec.release <- struct{}{}
	<-out
	start := time.Now()
	if got := <-rec.started; fmt.Sprint(got) != "[b1]" {
		t.Fatalf("batch = %v", got)
	}
	if waited := time.Since(start); waited != time.Hour {
		t.Fatalf("a request queued behind a pass waited %v for company, want one window", waited)
	}
	rec.release <- struct{}{}
	if r := <-out; r.err != nil {
		t.Fatal(r.err)
	}
}
