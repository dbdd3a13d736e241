package cache

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func isLoaded(c *Cache, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[id] != nil
}

func TestKeepAliveExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
		use(t, c, "a")
		advance(DefaultKeepAlive - time.Second)
		if !isLoaded(c, "a") {
			t.Fatal("unloaded before its keep-alive")
		}
		advance(time.Second)
		if isLoaded(c, "a") {
			t.Fatal("still loaded after its keep-alive")
		}
		<-l.inst("a", 0).closed
	})
}

func TestKeepAliveRestartsOnUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
		use(t, c, "a")
		advance(4 * time.Minute)
		use(t, c, "a") // idle again from t+4m: expires at t+9m
		advance(time.Minute)
		if !isLoaded(c, "a") {
			t.Fatal("expired 5m after the first use, not the last")
		}
		advance(4*time.Minute - time.Nanosecond)
		if !isLoaded(c, "a") {
			t.Fatal("expired early")
		}
		advance(time.Nanosecond)
		if isLoaded(c, "a") {
			t.Fatal("still loaded 5m after the last use")
		}
	})
}

func TestKeepAliveNeverWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
		h := mustAcquire(t, c, "a")
		advance(time.Hour)
		if !isLoaded(c, "a") || l.inst("a", 0).isClosed() {
			t.Fatal("unloaded while a handle is held")
		}
		h.Release()
		advance(DefaultKeepAlive)
		if isLoaded(c, "a") {
			t.Fatal("not unloaded after release + keep-alive")
		}
	})
}

func TestKeepAliveZeroUnloadsWhenIdle(t *testing.T) {
	l := newFakeLoader()
	l.slots = 3
	c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
	h, err := c.Acquire(context.Background(), "a", AcquireOptions{KeepAlive: dur(0)})
	if err != nil {
		t.Fatal(err)
	}
	h2 := mustAcquire(t, c, "a") // a request without override resets to the default
	h3, err := c.Acquire(context.Background(), "a", AcquireOptions{KeepAlive: dur(0)})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	h2.Release()
	if !isLoaded(c, "a") {
		t.Fatal("unloaded while a handle is held")
	}
	h3.Release()
	if isLoaded(c, "a") {
		t.Fatal("keep-alive 0: still loaded once idle")
	}
	<-l.inst("a", 0).closed
}

func TestKeepAliveNegativeKeepsLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
		h, err := c.Acquire(context.Background(), "a", AcquireOptions{KeepAlive: dur(-1)})
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
		advance(1000 * time.Hour)
		if !isLoaded(c, "a") {
			t.Fatal("keep-alive < 0: unloaded")
		}
		m := c.Snapshot().Models[0]
		if !m.ExpiresAt.IsZero() || m.KeepAlive >= 0 {
			t.Fatalf("snapshot: expires %v, keep-alive %v", m.ExpiresAt, m.KeepAlive)
		}
	})
}

func TestKeepAliveOverrideShortens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLoader()
		c := newTestCache(t, testConfig(), specs{"a": {RAM: 1}}, l)
		use(t, c, "a")
		h, err := c.Acquire(context.Background(), "a", AcquireOptions{KeepAlive: dur(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
		advance(time.Minute)
		if isLoaded(c, "a") {
			t.Fatal("a 1m keep-alive did not replace the armed 5m one")
		}
	})
}
