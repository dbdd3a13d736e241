package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// advance moves the clock of the test's synctest bubble forward by d, firing the
// keep-alive, cooldown and memory-wait timers that come due, and returns once every
// goroutine of the bubble has finished or blocked again.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// fakeInst is a loaded model that records its Close.
type fakeInst struct {
	id        string
	size      int64
	slots     int
	closed    chan struct{}
	closeOnce sync.Once
	onClose   func(id string)
}

func (f *fakeInst) Close() error {
	f.closeOnce.Do(func() {
		if f.onClose != nil {
			f.onClose(f.id)
		}
		close(f.closed)
	})
	return nil
}
func (f *fakeInst) Size() int64 { return f.size }
func (f *fakeInst) Slots() int  { return f.slots }

func (f *fakeInst) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

// mortalInst can die: kill closes Done.
type mortalInst struct {
	*fakeInst
	done chan struct{}
	err  error
}

func (m *mortalInst) Done() <-chan struct{} { return m.done }
func (m *mortalInst) Err() error            { return m.err }
func (m *mortalInst) kill(err error)        { m.err = err; close(m.done) }

// placedInst reports its real placement.
type placedInst struct {
	*fakeInst
	place Placement
}

func (p *placedInst) Placement() Placement { return p.place }

// fakeLoader loads fakeInsts; hooks let a test gate, fail or wrap loads.
type fakeLoader struct {
	mu      sync.Mutex
	loads   map[string]int
	insts   map[string][]*fakeInst
	started chan string   // receives the id at each load start (buffered)
	gate    chan struct{} // when non-nil, loads wait until it is closed
	fail    func(id string, n int) error
	wrap    func(*fakeInst) Instance
	slots   int
	sizeOf  func(Spec) int64 // real size; nil = the estimate
	closes  chan string      // receives the id at each Close (buffered)
}

func newFakeLoader() *fakeLoader {
	return &fakeLoader{
		loads:   make(map[string]int),
		insts:   make(map[string][]*fakeInst),
		started: make(chan string, 1024),
		closes:  make(chan string, 1024),
		slots:   1,
	}
}

func (l *fakeLoader) Load(ctx context.Context, spec Spec) (Instance, error) {
	l.mu.Lock()
	l.loads[spec.ID]++
	n := l.loads[spec.ID]
	gate := l.gate
	l.mu.Unlock()
	l.started <- spec.ID
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if l.fail != nil {
		if err := l.fail(spec.ID, n); err != nil {
			return nil, err
		}
	}
	size := spec.RAM
	if l.sizeOf != nil {
		size = l.sizeOf(spec)
	}
	fi := &fakeInst{id: spec.ID, size: size, slots: l.slots, closed: make(chan struct{}),
		onClose: func(id string) { l.closes <- id }}
	l.mu.Lock()
	l.insts[spec.ID] = append(l.insts[spec.ID], fi)
	l.mu.Unlock()
	if l.wrap != nil {
		return l.wrap(fi), nil
	}
	return fi, nil
}

func (l *fakeLoader) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loads[id]
}

func (l *fakeLoader) inst(id string, i int) *fakeInst {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.insts[id][i]
}

var errNotFound = errors.New("model not found")

// specs is a Resolver over a fixed set of models.
type specs map[string]Spec

func (s specs) Resolve(_ context.Context, id string) (Spec, error) {
	sp, ok := s[id]
	if !ok {
		return Spec{}, errNotFound
	}
	return sp, nil
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.QueueLen = 64
	return cfg
}

// newTestCache builds a cache and closes it at the end of the test, checking that
// every goroutine it started has ended. Tests that move time call it inside
// synctest.Test, so its clock is the bubble's.
func newTestCache(t *testing.T, cfg Config, s specs, l *fakeLoader) *Cache {
	t.Helper()
	c, err := New(cfg, s.Resolve, l.Load, WithLogger(quiet))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.running != 0 || len(c.entries) != 0 || len(c.retiring) != 0 || c.used.ram != 0 || c.used.count != 0 {
			t.Errorf("after Close: running=%d entries=%d retiring=%d used=%+v", c.running, len(c.entries), len(c.retiring), c.used)
		}
	})
	return c
}

// waitFor blocks until cond, evaluated under c.mu, holds. It wakes on the cache's
// state-change events, never on time.
func waitFor(c *Cache, cond func() bool) {
	for {
		c.mu.Lock()
		if cond() {
			c.mu.Unlock()
			return
		}
		ch := c.watchLocked()
		c.mu.Unlock()
		<-ch
	}
}

// queued is the number of waiters of id's live entry; call under c.mu.
func queued(c *Cache, id string) int {
	if e := c.entries[id]; e != nil {
		return e.queue.Len()
	}
	return -1
}

func mustAcquire(t *testing.T, c *Cache, id string) *Handle {
	t.Helper()
	h, err := c.Acquire(context.Background(), id, AcquireOptions{})
	if err != nil {
		t.Fatalf("Acquire(%q): %v", id, err)
	}
	return h
}

func use(t *testing.T, c *Cache, id string) {
	t.Helper()
	mustAcquire(t, c, id).Release()
}

// quiet drops the cache's logs in tests.
var quiet = slog.New(slog.DiscardHandler)

func dur(d time.Duration) *time.Duration { return &d }
