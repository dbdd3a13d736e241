package pipelines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modeld/modeld/cache"
)

// batchedInst is a loaded pipeline as the daemon wires it: MaxInFlight slots
// in the cache, each request one call of the pipeline's batcher.
type batchedInst struct{ b *Batcher[string, string] }

func (i *batchedInst) Close() error { i.b.Close(); return nil }
func (i *batchedInst) Size() int64  { return 1 }
func (i *batchedInst) Slots() int   { return MaxInFlight }

// The cache is the one admission point of a pipeline: while a forward pass
// runs, every request the cache admits is queued by the batcher (none meets
// ErrBusy), and the first request beyond the model's admission is refused by
// the cache with a retry-after. It runs in a synctest bubble, where the batcher's
// wait windows pass as soon as every goroutine waits.
func TestOnlyTheCacheRefusesAPipelineRequest(t *testing.T) {
	synctest.Test(t, testOnlyTheCacheRefusesAPipelineRequest)
}

func testOnlyTheCacheRefusesAPipelineRequest(t *testing.T) {
	gate := make(chan struct{})
	started := make(chan int, MaxInFlight)
	run := func(_ context.Context, reqs []string) ([]string, error) {
		started <- len(reqs)
		<-gate
		return reqs, nil
	}
	enqueued := make(chan struct{}, MaxInFlight)
	// The batcher of a loaded pipeline, from the options the daemon passes.
	cfg := Options{}.batcherConfig()
	cfg.TokenBudget = 1 // one request per pass: the rest wait in the queue
	inst := &batchedInst{b: newBatcher(cfg, strCost, run, batcherHooks{enqueued: func() { enqueued <- struct{}{} }})}

	cc := cache.DefaultConfig()
	cc.QueueLen = 0
	cc.RetryAfter = 7 * time.Second
	resolve := func(_ context.Context, id string) (cache.Spec, error) { return cache.Spec{ID: id, Task: "embed"}, nil }
	load := func(context.Context, cache.Spec) (cache.Instance, error) { return inst, nil }
	c, err := cache.New(cc, resolve, load, cache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()

	var wg sync.WaitGroup
	errs := make(chan error, MaxInFlight)
	for i := range MaxInFlight {
		h, err := c.Acquire(context.Background(), "e", cache.AcquireOptions{})
		if err != nil {
			t.Fatalf("request %d refused by the cache: %v", i, err)
		}
		wg.Go(func() {
			defer h.Release()
			b := h.Instance().(*batchedInst).b
			if _, err := b.Do(context.Background(), fmt.Sprint(i)); err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
				enqueued <- struct{}{} // refused without entering the queue
			}
		})
		<-enqueued
		if i == 0 {
			<-started // the first pass runs and holds the batcher
		}
	}
	extra, err := c.Acquire(context.Background(), "e", cache.AcquireOptions{})
	var busy *cache.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, cache.ErrBusy) || busy.RetryAfter != 7*time.Second {
		t.Errorf("request beyond the admission = %v, want the cache's BusyError with retry after 7s", err)
	}
	if extra != nil {
		extra.Release()
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an admitted request failed: %v (busy: %v)", err, errors.Is(err, ErrBusy))
	}
}
