package main

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// hangCeiling bounds every wait of these tests on another process (a daemon, a
// runner, an agent CLI, a browser). It only turns a hang into a failure: no
// assertion depends on it, and a loaded 2-core machine is far from it.
const hangCeiling = 5 * time.Minute

// poll calls cond until it holds, and fails the test (naming what it waited for)
// when hangCeiling passes first. It is for states that only another process knows
// and that send no event: /proc, /metrics, /v1/system, a log file.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangCeiling)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", hangCeiling, what)
		}
		<-tick.C
	}
}

// growing is text another goroutine appends to (a daemon's log, a terminal's
// output), with an event for every append, so that a test waits for what it
// needs without polling.
type growing struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed and replaced at every append
	closed  chan struct{} // closed by end
	endOnce sync.Once
}

func newGrowing() *growing {
	return &growing{changed: make(chan struct{}), closed: make(chan struct{})}
}

func (g *growing) write(s string) {
	g.mu.Lock()
	g.b.WriteString(s)
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// end says no more text comes (the process closed its output).
func (g *growing) end() { g.endOnce.Do(func() { close(g.closed) }) }

func (g *growing) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.String()
}

// await waits until done(text) holds, and fails the test with the text when the
// output ends first or hangCeiling passes.
func (g *growing) await(t testing.TB, what string, done func(text string) bool) {
	t.Helper()
	ceiling := time.NewTimer(hangCeiling)
	defer ceiling.Stop()
	for {
		g.mu.Lock()
		text, ch := g.b.String(), g.changed
		g.mu.Unlock()
		if done(text) {
			return
		}
		select {
		case <-ch:
		case <-g.closed:
			if g.mu.Lock(); done(g.b.String()) {
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			t.Fatalf("the output ended before %s; it holds:\n%s", what, text)
		case <-ceiling.C:
			t.Fatalf("waited %s for %s; the output holds:\n%s", hangCeiling, what, text)
		}
	}
}
