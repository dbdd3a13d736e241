package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func loadedIDs(c *Cache) []string {
	var ids []string
	for _, m := range c.Snapshot().Models {
		ids = append(ids, m.ID+":"+m.State)
	}
	return ids
}

func TestLRUEvictionOrder(t *testing.T) {
	l := newFakeLoader()
	cfg := testConfig()
	cfg.RAM = 300
	c := newTestCache(t, cfg, specs{
		"a": {RAM: 100}, "b": {RAM: 100}, "c": {RAM: 100}, "d": {RAM: 100}, "big": {RAM: 200},
	}, l)

	for _, id := range []string{"a", "b", "c", "a"} {
		use(t, c, id)
	}
	// Least recently used first: b, c, a.
	use(t, c, "d")
	if got := <-l.closes; got != "b" {
		t.Fatalf("first eviction: %s, want b", got)
	}
	use(t, c, "b")
	if got := <-l.closes; got != "c" {
		t.Fatalf("second eviction: %s, want c", got)
	}
	// Order now a, d, b: room for 200 takes the two least recent (closed in parallel).
	use(t, c, "big")
	if got := map[string]bool{<-l.closes: true, <-l.closes: true}; !got["a"] || !got["d"] {
		t.Fatalf("evictions for a 200-byte model: %v, want a and d", got)
	}
	if got := strings.Join(loadedIDs(c), " "); got != "b:ready big:ready" {
		t.Fatalf("loaded: %s", got)
	}
	if got := testutil.ToFloat64(c.m.evictions.WithLabelValues("budget")); got != 4 {
		t.Fatalf("budget evictions = %v, want 4", got)
	}
}

func TestMaxLoadedModels(t *testing.T) {
	l := newFakeLoader()
	cfg := testConfig()
	cfg.MaxLoaded = 2
	c := newTestCache(t, cfg, specs{"a": {}, "b": {}, "c": {}}, l)
	use(t, c, "a")
	use(t, c, "b")
	use(t, c, "c")
	if got := <-l.closes; got != "a" {
		t.Fatalf("evicted %s, want a", got)
	}
	use(t, c, "b")
	use(t, c, "a")
	if got := <-l.closes; got != "c" {
		t.Fatalf("evicted %s, want c", got)
	}
	if got := strings.Join(loadedIDs(c), " "); got != "a:ready b:ready" {
		t.Fatalf("loaded: %s", got)
	}
}

func TestVRAMBudgetPerGPU(t *testing.T) {
	l := newFakeLoader()
	cfg := testConfig()
	cfg.VRAM = map[string]int64{"cuda:0": 100, "cuda:1": 100}
	c := newTestCache(t, cfg, specs{
		"g1": {Device: "cuda:1", VRAM: 80}, "g0a": {Device: "cuda:0", VRAM: 80}, "g0b": {Device: "cuda:0", VRAM: 80},
	}, l)
	use(t, c, "g1")
	use(t, c, "g0a")
	use(t, c, "g0b") // g1 is older but on another GPU
	if got := <-l.closes; got != "g0a" {
		t.Fatalf("evicted %s, want g0a", got)
	}
	s := c.Snapshot()
	if s.VRAM["cuda:0"] != (Usage{UsedBytes: 80, BudgetBytes: 100}) || s.VRAM["cuda:1"] != (Usage{UsedBytes: 80, BudgetBytes: 100}) {
		t.Fatalf("VRAM usage: %+v", s.VRAM)
	}
}

func TestBusyMemoryWaitsThenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		cfg := testConfig()
		cfg.RAM, cfg.MaxWait, cfg.RetryAfter = 100, 10*time.Second, 2*time.Second
		c := newTestCache(t, cfg, specs{"a": {RAM: 100}, "b": {RAM: 100}}, l)

		h := mustAcquire(t, c, "a")
		res := make(chan error, 1)
		go func() {
			_, err := c.Acquire(context.Background(), "b", AcquireOptions{})
			res <- err
		}()
		synctest.Wait() // the load of b waits for memory, up to MaxWait
		advance(10 * time.Second)
		err := <-res
		var busy *BusyError
		if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) || busy.RetryAfter != 2*time.Second {
			t.Fatalf("Acquire(b) = %v, want *BusyError retry after 2s", err)
		}
		if ra, ok := RetryAfter(err); !ok || ra != 2*time.Second {
			t.Fatalf("RetryAfter = %v %v", ra, ok)
		}
		if l.count("b") != 0 || l.inst("a", 0).isClosed() {
			t.Fatal("b loaded or busy a evicted")
		}
		if got := testutil.ToFloat64(c.m.busy.WithLabelValues("memory")); got != 1 {
			t.Fatalf("busy{memory} = %v, want 1", got)
		}
		h.Release()
	})
}

func TestBusyMemoryFreedByRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		cfg := testConfig()
		cfg.RAM = 100
		c := newTestCache(t, cfg, specs{"a": {RAM: 100}, "b": {RAM: 100}}, l)

		h := mustAcquire(t, c, "a")
		got := make(chan *Handle, 1)
		go func() {
			h, err := c.Acquire(context.Background(), "b", AcquireOptions{})
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		synctest.Wait()
		h.Release() // a becomes idle, so b's load evicts it
		hb := <-got
		if hb == nil {
			t.Fatal("b not loaded")
		}
		if !l.inst("a", 0).isClosed() {
			t.Fatal("a not evicted")
		}
		hb.Release()
	})
}

func TestWaiterForMemoryCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		cfg := testConfig()
		cfg.RAM = 100
		c := newTestCache(t, cfg, specs{"a": {RAM: 100}, "b": {RAM: 100}}, l)

		h := mustAcquire(t, c, "a")
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctx, "b", AcquireOptions{})
			res <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		h.Release()
	})
}

func TestTooLargeRefusedAtOnce(t *testing.T) {
	const gib = 1 << 30
	l := newFakeLoader()
	cfg := testConfig()
	cfg.RAM = 1 * gib
	cfg.VRAM = map[string]int64{"cuda:0": 2 * gib}
	c := newTestCache(t, cfg, specs{
		"big": {RAM: 3 * gib}, "gpu": {RAM: 1, Device: "cuda:0", VRAM: 6 * gib},
	}, l)
	for range 2 { // refused each time, without a cooldown
		_, err := c.Acquire(context.Background(), "big", AcquireOptions{})
		var tl *TooLargeError
		if !errors.As(err, &tl) || !strings.Contains(err.Error(), "needs 3.0 GiB of RAM but the budget is 1.0 GiB") {
			t.Fatalf("Acquire(big) = %v, want *TooLargeError with both sizes", err)
		}
	}
	_, err := c.Acquire(context.Background(), "gpu", AcquireOptions{})
	if !strings.Contains(err.Error(), "needs 6.0 GiB of VRAM of cuda:0 but the budget is 2.0 GiB") {
		t.Fatalf("Acquire(gpu) = %v", err)
	}
	if l.count("big")+l.count("gpu") != 0 {
		t.Fatal("a too large model reached the loader")
	}
}

func TestRealSizeReplacesEstimate(t *testing.T) {
	l := newFakeLoader()
	l.sizeOf = func(s Spec) int64 { return s.RAM / 2 }
	cfg := testConfig()
	cfg.RAM = 300
	c := newTestCache(t, cfg, specs{"a": {RAM: 200}, "b": {RAM: 200}}, l)
	use(t, c, "a")
	if got := c.Snapshot().RAM.UsedBytes; got != 100 {
		t.Fatalf("RAM used after load = %d, want the real 100", got)
	}
	use(t, c, "b") // 100 + 200 estimate fits: nothing evicted
	if l.inst("a", 0).isClosed() {
		t.Fatal("a evicted although the real sizes fit")
	}
	if got := c.Snapshot().RAM.UsedBytes; got != 200 {
		t.Fatalf("RAM used = %d, want 200", got)
	}
}
