package cache

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		l.slots = 2
		l.sizeOf = func(s Spec) int64 { return s.RAM - 10 }
		l.wrap = func(f *fakeInst) Instance {
			if f.id == "chat" {
				return &placedInst{fakeInst: f, place: Placement{Device: "cuda:0", GPUShare: 0.75, VRAM: 3000}}
			}
			return f
		}
		cfg := testConfig()
		cfg.RAM, cfg.MaxLoaded = 10000, 4
		cfg.VRAM = map[string]int64{"cuda:0": 8000}
		c := newTestCache(t, cfg, specs{
			"chat":  {Task: "chat", Backend: "llama", Device: "cuda:0", GPUShare: 1, RAM: 1000, VRAM: 4000},
			"embed": {Task: "embed", Backend: "onnx", Device: "cpu", RAM: 500},
		}, l)
		t0 := time.Now()
		h1 := mustAcquire(t, c, "chat")
		h2 := mustAcquire(t, c, "chat")
		queuedDone := make(chan struct{})
		go func() {
			defer close(queuedDone)
			h, err := c.Acquire(context.Background(), "chat", AcquireOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			h.Release()
		}()
		waitFor(c, func() bool { return queued(c, "chat") == 1 })
		advance(time.Minute)
		use(t, c, "embed")

		s := c.Snapshot()
		want := []ModelStatus{{
			ID: "chat", Task: "chat", Backend: "llama", State: "ready", Device: "cuda:0", GPUShare: 0.75,
			SizeBytes: 990, VRAMBytes: 3000, SlotsInUse: 2, Slots: 2, Queue: 1, LoadedAt: t0, KeepAlive: DefaultKeepAlive,
		}, {
			ID: "embed", Task: "embed", Backend: "onnx", State: "ready", Device: "cpu",
			SizeBytes: 490, Slots: 2, LoadedAt: t0.Add(time.Minute), IdleSince: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Minute + DefaultKeepAlive), KeepAlive: DefaultKeepAlive,
		}}
		if len(s.Models) != len(want) {
			t.Fatalf("models: %+v", s.Models)
		}
		for i := range want {
			if s.Models[i] != want[i] {
				t.Errorf("model %d:\n got %+v\nwant %+v", i, s.Models[i], want[i])
			}
		}
		if s.RAM != (Usage{UsedBytes: 1480, BudgetBytes: 10000}) || s.VRAM["cuda:0"] != (Usage{UsedBytes: 3000, BudgetBytes: 8000}) ||
			s.Loaded != 2 || s.MaxLoaded != 4 {
			t.Errorf("totals: %+v", s)
		}
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{`"id":"chat"`, `"slots_in_use":2`, `"queue":1`, `"gpu_share":0.75`, `"expires_at":"`, `"loaded_at":"`, `"idle_since":"`, `"size_bytes":990`} {
			if !strings.Contains(string(js), key) {
				t.Errorf("JSON lacks %s: %s", key, js)
			}
		}
		h1.Release()
		h2.Release()
		<-queuedDone
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("boom")
		l := newFakeLoader()
		l.fail = func(id string, _ int) error {
			if id == "bad" {
				return errBoom
			}
			return nil
		}
		cfg := testConfig()
		cfg.QueueLen = 0
		c := newTestCache(t, cfg, specs{"a": {}, "bad": {}}, l)
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(c); err != nil {
			t.Fatalf("register: %v", err)
		}

		use(t, c, "a")
		h := mustAcquire(t, c, "a")
		if _, err := c.Acquire(context.Background(), "a", AcquireOptions{}); !errors.Is(err, ErrBusy) {
			t.Fatalf("no queue, busy slot: %v", err)
		}
		h.Release()
		if _, err := c.Acquire(context.Background(), "bad", AcquireOptions{}); !errors.Is(err, errBoom) {
			t.Fatalf("Acquire(bad) = %v", err)
		}
		var cd *CooldownError
		if _, err := c.Acquire(context.Background(), "bad", AcquireOptions{}); !errors.As(err, &cd) {
			t.Fatalf("Acquire(bad) again = %v, want cooldown", err)
		}
		advance(DefaultKeepAlive)

		for _, m := range []struct {
			name string
			c    prometheus.Collector
			want float64
		}{
			{"loads ok", c.m.loads.WithLabelValues("a", "ok"), 1},
			{"loads error", c.m.loads.WithLabelValues("bad", "error"), 1},
			{"requests a", c.m.requests.WithLabelValues("a"), 2},
			{"busy queue_full", c.m.busy.WithLabelValues("queue_full"), 1},
			{"busy cooldown", c.m.busy.WithLabelValues("cooldown"), 1},
			{"evictions keep_alive", c.m.evictions.WithLabelValues("keep_alive"), 1},
			{"queue length", c.m.queue, 0},
		} {
			if got := testutil.ToFloat64(m.c); got != m.want {
				t.Errorf("%s = %v, want %v", m.name, got, m.want)
			}
		}
		if n, err := testutil.GatherAndCount(reg, "modeld_model_load_seconds"); err != nil || n != 1 {
			t.Errorf("load seconds histogram: %d series, %v", n, err)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP modeld_model_evictions_total Models unloaded, by reason (budget, keep_alive, unload, crash, shutdown).
# TYPE modeld_model_evictions_total counter
modeld_model_evictions_total{reason="keep_alive"} 1
`), "modeld_model_evictions_total"); err != nil {
			t.Error(err)
		}
	})
}

func TestCloseUnloadsAndRefuses(t *testing.T) {
	l := newFakeLoader()
	c, err := New(testConfig(), specs{"a": {}, "b": {}}.Resolve, l.Load, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	use(t, c, "a")
	h := mustAcquire(t, c, "b")
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	<-l.inst("a", 0).closed
	waitFor(c, func() bool { return c.closed })
	if _, err := c.Acquire(context.Background(), "a", AcquireOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if l.inst("b", 0).isClosed() {
		t.Fatal("Close closed an instance in use")
	}
	h.Release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !l.inst("b", 0).isClosed() {
		t.Fatal("b not closed")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		var mu sync.Mutex
		var mortals []*mortalInst
		l.wrap = func(f *fakeInst) Instance {
			m := &mortalInst{fakeInst: f, done: make(chan struct{})}
			mu.Lock()
			mortals = append(mortals, m)
			mu.Unlock()
			return m
		}
		l.fail = func(id string, _ int) error {
			if id == "bad" {
				return errors.New("boom")
			}
			return nil
		}
		cfg := testConfig()
		cfg.MaxLoaded = 2
		c, err := New(cfg, specs{"a": {}, "b": {}, "c": {}, "bad": {}}.Resolve, l.Load, WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		use(t, c, "a")
		use(t, c, "b")
		use(t, c, "c") // evicts a
		if _, err := c.Acquire(context.Background(), "bad", AcquireOptions{}); err == nil {
			t.Fatal("Acquire(bad) succeeded")
		}
		mu.Lock()
		mortals[1].kill(errors.New("exit 2")) // b dies idle
		mu.Unlock()
		waitFor(c, func() bool { return c.entries["b"] == nil })
		if err := c.Unload(context.Background(), "c", true); err != nil {
			t.Fatal(err)
		}
		use(t, c, "a")
		advance(DefaultKeepAlive)
		h := mustAcquire(t, c, "b")
		h.Release()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if running != 0 {
			t.Fatalf("%d cache goroutines still running after Close", running)
		}
		// synctest.Test fails the test when a goroutine of the bubble (the cache's
		// watchers and timers among them) outlives it.
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RAM, cfg.QueueLen = -1, -2
	_, err := New(cfg, specs{}.Resolve, newFakeLoader().Load, WithLogger(quiet))
	if err == nil || !strings.Contains(err.Error(), "RAM budget -1") || !strings.Contains(err.Error(), "queue length -2") {
		t.Fatalf("New(bad config) = %v, want both problems named", err)
	}
	if _, err := New(DefaultConfig(), nil, nil); err == nil {
		t.Fatal("New without resolver and loader succeeded")
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	l := newFakeLoader()
	l.slots = 1 << 16
	c, err := New(DefaultConfig(), specs{"a": {RAM: 1}}.Resolve, l.Load, WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	h, err := c.Acquire(ctx, "a", AcquireOptions{})
	if err != nil {
		b.Fatal(err)
	}
	h.Release()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h, err := c.Acquire(ctx, "a", AcquireOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			h.Release()
		}
	})
}
