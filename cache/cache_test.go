package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestConcurrentAcquiresLoadOnce(t *testing.T) {
	l := newFakeLoader()
	l.gate = make(chan struct{})
	l.slots = 4
	c := newTestCache(t, testConfig(), specs{"a": {Task: "chat", RAM: 100}}, l)

	const n = 64
	insts := make(chan Instance, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			h, err := c.Acquire(context.Background(), "a", AcquireOptions{})
			if err != nil {
				errs <- err
				return
			}
			insts <- h.Instance()
			h.Release()
		})
	}
	waitFor(c, func() bool { return queued(c, "a") == n })
	close(l.gate)
	wg.Wait()
	close(errs)
	close(insts)
	for err := range errs {
		t.Errorf("Acquire: %v", err)
	}
	if got := l.count("a"); got != 1 {
		t.Fatalf("loads = %d, want 1", got)
	}
	want := l.inst("a", 0)
	got := 0
	for inst := range insts {
		if inst != want {
			t.Fatalf("a caller got instance %p, want the shared %p", inst, want)
		}
		got++
	}
	if got != n {
		t.Fatalf("%d callers got the instance, want %d", got, n)
	}
}

func TestDifferentIDsLoadInParallel(t *testing.T) {
	l := newFakeLoader()
	l.gate = make(chan struct{})
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}, "b": {RAM: 1}}, l)

	done := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			h, err := c.Acquire(context.Background(), id, AcquireOptions{})
			if err == nil {
				h.Release()
			}
			done <- err
		}()
	}
	// Both loads are in progress at once before either may finish.
	seen := map[string]bool{<-l.started: true, <-l.started: true}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("loads started: %v, want a and b", seen)
	}
	close(l.gate)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestFailedLoadReachesEveryWaiterAndCoolsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("runner exited with status 1")
		l := newFakeLoader()
		l.gate = make(chan struct{})
		failing := true
		var mu sync.Mutex
		l.fail = func(string, int) error {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return errBoom
			}
			return nil
		}
		cfg := testConfig()
		cfg.CooldownBase, cfg.CooldownMax = time.Second, 4*time.Second
		c := newTestCache(t, cfg, specs{"a": {RAM: 1}}, l)

		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := c.Acquire(context.Background(), "a", AcquireOptions{})
				errs <- err
			}()
		}
		waitFor(c, func() bool { return queued(c, "a") == n })
		close(l.gate)
		for range n {
			if err := <-errs; !errors.Is(err, errBoom) {
				t.Fatalf("waiter got %v, want the load error", err)
			}
		}

		// Each further failure doubles the cooldown, up to CooldownMax.
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
			_, err := c.Acquire(context.Background(), "a", AcquireOptions{})
			var cd *CooldownError
			if !errors.As(err, &cd) {
				t.Fatalf("failure %d: Acquire = %v, want *CooldownError", i+1, err)
			}
			if cd.RetryAfter != want || cd.Failures != i+1 || !errors.Is(err, errBoom) {
				t.Fatalf("failure %d: cooldown %v after %d failures (%v), want %v after %d", i+1, cd.RetryAfter, cd.Failures, err, want, i+1)
			}
			if ra, ok := RetryAfter(err); !ok || ra != want {
				t.Fatalf("RetryAfter = %v, %v", ra, ok)
			}
			if got := l.count("a"); got != i+1 {
				t.Fatalf("loads = %d, want %d: the cooldown must refuse without loading", got, i+1)
			}
			advance(want - time.Millisecond)
			if _, err := c.Acquire(context.Background(), "a", AcquireOptions{}); !errors.As(err, &cd) {
				t.Fatalf("1ms before the end of the cooldown: %v, want *CooldownError", err)
			}
			advance(time.Millisecond)
			if i == 3 {
				break
			}
			if _, err := c.Acquire(context.Background(), "a", AcquireOptions{}); !errors.Is(err, errBoom) {
				t.Fatalf("after the cooldown: %v, want a new load failing with the load error", err)
			}
		}

		// A success clears the failure count.
		mu.Lock()
		failing = false
		mu.Unlock()
		use(t, c, "a")
		c.mu.Lock()
		_, stillFailed := c.failures["a"]
		c.mu.Unlock()
		if stillFailed {
			t.Fatal("a successful load left the failure record")
		}
	})
}

func TestResolveErrorNotCooledDown(t *testing.T) {
	l := newFakeLoader()
	c := newTestCache(t, testConfig(), specs{}, l)
	for range 2 {
		if _, err := c.Acquire(context.Background(), "nope", AcquireOptions{}); !errors.Is(err, errNotFound) {
			t.Fatalf("Acquire(unknown) = %v, want the resolver's error each time", err)
		}
	}
}

func TestFullQueueRefusesAtOnce(t *testing.T) {
	l := newFakeLoader()
	cfg := testConfig()
	cfg.QueueLen = 2
	cfg.RetryAfter = 3 * time.Second
	c := newTestCache(t, cfg, specs{"a": {RAM: 1}}, l)

	h := mustAcquire(t, c, "a")
	got := make(chan *Handle, 2)
	for range 2 {
		go func() {
			h, err := c.Acquire(context.Background(), "a", AcquireOptions{})
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	waitFor(c, func() bool { return queued(c, "a") == 2 })
	_, err := c.Acquire(context.Background(), "a", AcquireOptions{})
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) || busy.RetryAfter != 3*time.Second {
		t.Fatalf("Acquire with a full queue = %v, want *BusyError wrapping ErrBusy, retry after 3s", err)
	}
	h.Release()
	(<-got).Release()
	(<-got).Release()
}

func TestCancelledWaiterFreesItsPlace(t *testing.T) {
	l := newFakeLoader()
	cfg := testConfig()
	cfg.QueueLen = 1
	c := newTestCache(t, cfg, specs{"a": {RAM: 1}}, l)

	h := mustAcquire(t, c, "a")
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "a", AcquireOptions{})
		first <- err
	}()
	waitFor(c, func() bool { return queued(c, "a") == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v, want context.Canceled", err)
	}
	c.mu.Lock()
	q := queued(c, "a")
	c.mu.Unlock()
	if q != 0 {
		t.Fatalf("queue after cancel = %d, want 0", q)
	}

	// Its place is free: another request queues and gets the slot on release.
	second := make(chan *Handle, 1)
	go func() {
		h, err := c.Acquire(context.Background(), "a", AcquireOptions{})
		if err != nil {
			t.Error(err)
		}
		second <- h
	}()
	waitFor(c, func() bool { return queued(c, "a") == 1 })
	h.Release()
	h2 := <-second
	if h2 == nil {
		t.Fatal("queued request got no handle")
	}
	h2.Release()
}

func TestWaiterCancelledDuringLoad(t *testing.T) {
	l := newFakeLoader()
	l.gate = make(chan struct{})
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)

	// A waiter cancelled while the model loads leaves; the load goes on.
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "a", AcquireOptions{})
		res <- err
	}()
	waitFor(c, func() bool { return queued(c, "a") == 1 })
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(l.gate)
	waitFor(c, func() bool { e := c.entries["a"]; return e != nil && !e.loading })
	c.mu.Lock()
	inUse := c.entries["a"].inUse
	c.mu.Unlock()
	if inUse != 0 {
		t.Fatalf("slots in use after the only waiter left = %d, want 0", inUse)
	}
	use(t, c, "a")
	if got := l.count("a"); got != 1 {
		t.Fatalf("loads = %d, want 1", got)
	}
}

func TestUnloadWaitsForHandles(t *testing.T) {
	l := newFakeLoader()
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
	h := mustAcquire(t, c, "a")
	inst := l.inst("a", 0)

	res := make(chan error, 1)
	go func() { res <- c.Unload(context.Background(), "a", true) }()
	// Retired, and no goroutine of the cache is left that could be closing it.
	waitFor(c, func() bool { return c.entries["a"] == nil && c.running == 0 })
	if inst.isClosed() {
		t.Fatal("instance closed while a handle is held")
	}
	select {
	case err := <-res:
		t.Fatalf("Unload returned %v while a handle is held", err)
	default:
	}
	h.Release()
	if err := <-res; err != nil {
		t.Fatalf("Unload: %v", err)
	}
	if !inst.isClosed() {
		t.Fatal("Unload returned before the instance was closed")
	}
	// The next request loads it again.
	use(t, c, "a")
	if got := l.count("a"); got != 2 {
		t.Fatalf("loads = %d, want 2", got)
	}
}

func TestUnloadWithoutWaitFailsFast(t *testing.T) {
	l := newFakeLoader()
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
	if err := c.Unload(context.Background(), "a", false); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("Unload(not loaded) = %v, want ErrNotLoaded", err)
	}
	h := mustAcquire(t, c, "a")
	err := c.Unload(context.Background(), "a", false)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "1 requests in flight") {
		t.Fatalf("Unload(busy, no wait) = %v, want ErrInUse saying 1 request in flight", err)
	}
	if inst := l.inst("a", 0); inst.isClosed() {
		t.Fatal("failed Unload closed the instance")
	}
	h.Release()
	if err := c.Unload(context.Background(), "a", false); err != nil {
		t.Fatalf("Unload(idle, no wait) = %v", err)
	}
	if !l.inst("a", 0).isClosed() {
		t.Fatal("instance not closed by Unload")
	}
}

func TestUnloadRequeuesWaiters(t *testing.T) {
	l := newFakeLoader()
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
	h := mustAcquire(t, c, "a")
	got := make(chan *Handle, 1)
	go func() {
		h, err := c.Acquire(context.Background(), "a", AcquireOptions{})
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitFor(c, func() bool { return queued(c, "a") == 1 })
	res := make(chan error, 1)
	go func() { res <- c.Unload(context.Background(), "a", true) }()
	// The queued request starts over on a fresh instance.
	h2 := <-got
	if h2 == nil || h2.Instance() == h.Instance() {
		t.Fatal("queued request did not get a fresh instance")
	}
	h.Release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	h2.Release()
}

func TestCrashedInstanceIsReloaded(t *testing.T) {
	l := newFakeLoader()
	var mortals []*mortalInst
	var mu sync.Mutex
	l.wrap = func(f *fakeInst) Instance {
		m := &mortalInst{fakeInst: f, done: make(chan struct{})}
		mu.Lock()
		mortals = append(mortals, m)
		mu.Unlock()
		return m
	}
	cfg := testConfig()
	cfg.RAM = 100
	c := newTestCache(t, cfg, specs{"a": {RAM: 100}}, l)

	h := mustAcquire(t, c, "a")
	mu.Lock()
	m := mortals[0]
	mu.Unlock()
	m.kill(errors.New("signal: killed"))
	waitFor(c, func() bool { return c.entries["a"] == nil })
	if err := h.Err(); !errors.Is(err, ErrDied) || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("Handle.Err = %v, want ErrDied with the cause", err)
	}
	h.Release()
	<-m.closed
	waitFor(c, func() bool { return c.used.ram == 0 && c.used.count == 0 })

	// The next request loads it again; a crash while idle frees it at once.
	h = mustAcquire(t, c, "a")
	if got := l.count("a"); got != 2 {
		t.Fatalf("loads = %d, want 2", got)
	}
	if h.Err() != nil {
		t.Fatalf("fresh instance: Err = %v", h.Err())
	}
	h.Release()
	mu.Lock()
	m = mortals[1]
	mu.Unlock()
	m.kill(nil)
	<-m.closed
	waitFor(c, func() bool { return c.used.ram == 0 && len(c.entries) == 0 })
}

// lateWatchedInst dies while the cache's death watcher has not seen it yet: the
// watcher gets a channel of its own (its first Done call), closed by the test.
type lateWatchedInst struct {
	*fakeInst
	calls                   atomic.Int32
	watching, watched, done chan struct{}
}

func (m *lateWatchedInst) Done() <-chan struct{} {
	if m.calls.Add(1) == 1 {
		close(m.watching)
		return m.watched
	}
	return m.done
}

func (m *lateWatchedInst) Err() error { return errors.New("signal: killed") }

// A request that comes after an instance died, before the death watcher ran,
// gets a fresh instance, not the dead one.
func TestAcquireAfterDeathBeforeWatcher(t *testing.T) {
	l := newFakeLoader()
	var first *lateWatchedInst
	l.wrap = func(f *fakeInst) Instance {
		m := &lateWatchedInst{fakeInst: f, watching: make(chan struct{}), watched: make(chan struct{}), done: make(chan struct{})}
		if first == nil {
			first = m
		}
		return m
	}
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 10}}, l)
	h := mustAcquire(t, c, "a")
	h.Release()
	<-first.watching  // the watcher waits on its own channel
	close(first.done) // the runner died; the watcher has not noticed
	h = mustAcquire(t, c, "a")
	defer h.Release()
	if h.Instance() == Instance(first) {
		t.Fatal("acquire handed out the dead instance")
	}
	if got := l.count("a"); got != 2 {
		t.Fatalf("loads = %d, want 2", got)
	}
	close(first.watched) // the watcher wakes up to an entry already retired
	<-first.closed
}
