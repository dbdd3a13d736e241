package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// ailingInst reports its health as set by the test.
type ailingInst struct {
	*mortalInst
	mu      sync.Mutex
	err     error
	changed chan struct{}
}

func (a *ailingInst) Health() (<-chan struct{}, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed, a.err
}

func (a *ailingInst) set(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
	close(a.changed)
	a.changed = make(chan struct{})
}

// refresh replaces the error without announcing a change (the silence
// grows; the state is the same).
func (a *ailingInst) refresh(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

var errNoAnswer = errors.New("runner has not responded for 6s")

// TestUnresponsiveInstance: while an instance reports that it does not
// answer, requests queued behind its busy slot are refused at once, new ones
// too (with the instance's own error), and the snapshot says so; when it
// answers again it serves; when it then dies (its watchdog killed it) the
// next request loads a new one.
func TestUnresponsiveInstance(t *testing.T) {
	l := newFakeLoader()
	var mu sync.Mutex
	var insts []*ailingInst
	l.wrap = func(f *fakeInst) Instance {
		a := &ailingInst{mortalInst: &mortalInst{fakeInst: f, done: make(chan struct{})}, changed: make(chan struct{})}
		mu.Lock()
		insts = append(insts, a)
		mu.Unlock()
		return a
	}
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 10}}, l)
	held := mustAcquire(t, c, "a") // the one slot, held by a request stuck in the instance
	mu.Lock()
	a := insts[0]
	mu.Unlock()

	queuedErr := make(chan error, 1)
	go func() {
		h, err := c.Acquire(context.Background(), "a", AcquireOptions{})
		if h != nil {
			h.Release()
		}
		queuedErr <- err
	}()
	waitFor(c, func() bool { return queued(c, "a") == 1 })
	a.set(errNoAnswer)
	if err := <-queuedErr; !errors.Is(err, ErrUnresponsive) || !errors.Is(err, errNoAnswer) {
		t.Fatalf("queued request: %v, want the instance's unresponsive error", err)
	}
	waitFor(c, func() bool { return c.entries["a"].ailing != nil })
	_, err := c.Acquire(context.Background(), "a", AcquireOptions{})
	if !errors.Is(err, ErrUnresponsive) || !strings.Contains(err.Error(), `model "a"`) {
		t.Fatalf("new request: %v, want a refusal naming the model", err)
	}
	if st := c.Snapshot().Models[0]; st.State != "unresponsive" || !strings.Contains(st.Problem, "has not responded") {
		t.Errorf("snapshot %+v, want state unresponsive with the reason", st)
	}
	a.refresh(errors.New("runner has not responded for 9s"))
	if _, err := c.Acquire(context.Background(), "a", AcquireOptions{}); !errors.Is(err, ErrUnresponsive) || !strings.Contains(err.Error(), "for 9s") {
		t.Errorf("a later request: %v, want the instance's current error", err)
	}

	a.set(nil) // it answers again
	waitFor(c, func() bool { return c.entries["a"].ailing == nil })
	if st := c.Snapshot().Models[0]; st.State != "ready" {
		t.Errorf("snapshot after recovery: %+v", st)
	}
	held.Release()
	use(t, c, "a")

	held = mustAcquire(t, c, "a")
	a.set(errNoAnswer)
	waitFor(c, func() bool { return c.entries["a"].ailing != nil })
	a.kill(errors.New("runner stalled: no progress for 20s, killed"))
	waitFor(c, func() bool { return c.entries["a"] == nil })
	if st := c.Snapshot().Models; len(st) != 1 || st[0].State != "crashed" || !strings.Contains(st[0].Problem, "stalled") {
		t.Errorf("snapshot after the kill: %+v, want it crashed with the cause", st)
	}
	held.Release()
	use(t, c, "a") // a fresh instance
	if got := l.count("a"); got != 2 {
		t.Fatalf("loads = %d, want 2", got)
	}
}
