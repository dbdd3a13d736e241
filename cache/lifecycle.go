package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/modeld/modeld/models"
)

// idleLocked starts the keep-alive of an entry nobody uses. The armed timer is
// reused across busy periods and re-checks the deadline when it fires.
func (c *Cache) idleLocked(e *entry) {
	e.idle = time.Now()
	switch {
	case e.keep == 0:
		c.retireLocked(e, reasonKeepAlive)
	case e.keep > 0:
		at := e.idle.Add(e.keep)
		if e.timer != nil && !e.timerAt.After(at) {
			return
		}
		c.armLocked(e, e.keep)
	}
}

func (c *Cache) armLocked(e *entry, d time.Duration) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timerGen++
	gen := e.timerGen
	e.timerAt = time.Now().Add(d)
	e.timer = time.AfterFunc(d, func() { c.expire(e, gen) })
}

func (c *Cache) expire(e *entry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != e.timerGen || e.retired {
		return
	}
	e.timer, e.timerAt = nil, time.Time{}
	if e.inUse > 0 || e.queue.Len() > 0 || e.keep < 0 {
		return // idleLocked arms again when it is idle
	}
	if left := e.idle.Add(e.keep).Sub(time.Now()); left > 0 {
		c.armLocked(e, left)
		return
	}
	c.retireLocked(e, reasonKeepAlive)
}

// retireLocked takes e out of service: new requests will load a fresh instance,
// queued ones start over, and it is closed once its last handle is released.
func (c *Cache) retireLocked(e *entry, why reason) {
	if e.retired {
		return
	}
	e.retired = true
	close(e.stop)
	if c.entries[e.id] == e {
		delete(c.entries, e.id)
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer, e.timerAt = nil, time.Time{}
	}
	e.timerGen++
	c.retiring[e] = struct{}{}
	c.freeing.add(e, 1)
	for e.queue.Len() > 0 {
		c.decideLocked(e, errRetry)
	}
	c.m.evictions.WithLabelValues(string(why)).Inc()
	c.log.Info("unloading model", "id", e.id, "reason", string(why), "in_flight", e.inUse)
	if e.inUse == 0 {
		c.startCloseLocked(e)
	}
	c.notifyLocked()
}

func (c *Cache) startCloseLocked(e *entry) {
	if e.closing {
		return
	}
	e.closing = true
	c.goLocked(func() {
		if err := e.inst.Close(); err != nil {
			c.log.Warn("closing model", "id", e.id, "err", err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.retiring, e)
		c.freeing.add(e, -1)
		c.used.add(e, -1)
		close(e.gone)
	})
}

// goLocked runs f in a goroutine the cache counts, so Close can wait for it.
func (c *Cache) goLocked(f func()) {
	c.running++
	go func() {
		f()
		c.mu.Lock()
		c.running--
		c.notifyLocked()
		c.mu.Unlock()
	}()
}

// watchLocked returns a channel closed at the next state change.
func (c *Cache) watchLocked() <-chan struct{} {
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

func (c *Cache) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Unload unloads model id. With wait it waits until in-flight requests released
// the instance (new requests then load it again); without, it fails with ErrInUse
// if any request holds or waits for it. ErrNotLoaded if id is not loaded;
// models.ErrInvalidID if it is no model id. Any spelling of the id names the
// same instance ("m:latest" unloads "m").
func (c *Cache) Unload(ctx context.Context, id string, wait bool) error {
	id, err := models.Canonical(id)
	if err != nil {
		return fmt.Errorf("unload: %w", err)
	}
	for {
		c.mu.Lock()
		e := c.entries[id]
		if e == nil {
			c.mu.Unlock()
			return fmt.Errorf("unload %q: %w", id, ErrNotLoaded)
		}
		if e.loading {
			c.mu.Unlock()
			if !wait {
				return fmt.Errorf("unload %q: %w: it is loading", id, ErrInUse)
			}
			select {
			case <-e.loaded:
				continue
			case <-ctx.Done():
				return fmt.Errorf("unload %q: %w", id, ctx.Err())
			}
		}
		if !wait && (e.inUse > 0 || e.queue.Len() > 0) {
			n, q := e.inUse, e.queue.Len()
			c.mu.Unlock()
			return fmt.Errorf("unload %q: %w: %d requests in flight, %d queued", id, ErrInUse, n, q)
		}
		c.retireLocked(e, reasonUnload)
		c.mu.Unlock()
		select {
		case <-e.gone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("unload %q: waiting for in-flight requests: %w", id, ctx.Err())
		}
	}
}

// Close refuses new requests, cancels loads, unloads every instance (busy ones
// when released) and waits until all are closed and its goroutines ended, or ctx
// is done.
func (c *Cache) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.cancel()
		for _, e := range c.entries {
			if !e.loading { // a finishing load sees closed and cleans up itself
				c.retireLocked(e, reasonShutdown)
			}
		}
	}
	for len(c.entries) > 0 || len(c.retiring) > 0 || c.running > 0 {
		ch := c.watchLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("closing model cache: %w", ctx.Err())
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}
