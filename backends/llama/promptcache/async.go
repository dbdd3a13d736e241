package promptcache

import (
	"context"
	"fmt"
)

// The writer goroutine: the decode loop hands a state over and goes on;
// the file is written here.

// SaveAsync queues Save on c's writer goroutine and reports whether it was
// queued: a save that would take the queued bytes over MaxPending, or one
// after Close, is dropped. state must not change afterwards.
func (c *Cache) SaveAsync(tokens []int32, state []byte) (queued bool) {
	n := int64(len(state))
	if c.pending.Add(n) > c.opts.MaxPending {
		c.pending.Add(-n)
		c.log.Warn("promptcache: save dropped: too much waits to be written", "tokens", len(tokens), "bytes", n)
		return false
	}
	defer func() {
		if recover() != nil { // closed
			c.pending.Add(-n)
			queued = false
		}
	}()
	c.jobs <- job{tokens: tokens, state: state}
	return true
}

// TouchAsync marks the entry that covers tokens as used, on the writer
// goroutine, in order with the saves queued before it: the LRU's order,
// and Newest's, is then the order the scheduler gave them.
func (c *Cache) TouchAsync(tokens []int32) {
	defer func() { _ = recover() }() // closed: nothing to order
	c.jobs <- job{tokens: tokens, touch: true}
}

func (c *Cache) writer() {
	defer close(c.done)
	for j := range c.jobs {
		if j.synced != nil {
			close(j.synced)
			continue
		}
		if j.touch {
			if name := c.Covering(j.tokens); name != "" {
				c.touch(name)
			}
			continue
		}
		if err := c.Save(j.tokens, j.state); err != nil {
			c.log.Warn("promptcache: save failed", "tokens", len(j.tokens), "err", err)
		} else {
			c.log.Debug("promptcache: saved", "tokens", len(j.tokens), "bytes", len(j.state))
		}
		c.pending.Add(-int64(len(j.state)))
	}
}

// Sync waits until the saves queued before it are written (or dropped),
// or ctx ends.
func (c *Cache) Sync(ctx context.Context) (err error) {
	j := job{synced: make(chan struct{})}
	defer func() {
		if recover() != nil { // closed: Close waits instead
			err = c.Close(ctx)
		}
	}()
	select {
	case c.jobs <- j:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-j.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking saves and waits until the queued ones are written or
// ctx ends (a write cut short leaves only a temporary file, which a later
// Open removes).
func (c *Cache) Close(ctx context.Context) error {
	c.close.Do(func() { close(c.jobs) })
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("promptcache: %d bytes left unwritten: %w", c.pending.Load(), ctx.Err())
	}
}
