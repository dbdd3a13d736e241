package promptcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Reading ahead. A model's runner opens its cache before it allocates the
// KV cache (hundreds of milliseconds of clearing memory) and starts reading
// the entry most likely wanted next on another goroutine: the newest one,
// which is the prefix of the sequence used last before the model was
// unloaded or the daemon stopped (the writer saves and touches entries in
// the order it is given them, and the scheduler gives them least recently
// used first). The first Load of that entry then takes what was read
// instead of reading again; any other Load drops it. Nothing here trusts
// the file more than Load does: the read-ahead is a Load.

// prefetch is one read-ahead: its result once done is closed.
type prefetch struct {
	name   string
	done   chan struct{}
	tokens []int32
	state  []byte
	err    error
}

// Newest is the name of the entry written or used last ("" when there is
// none).
func (c *Cache) Newest() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var name string
	var at time.Time
	for n, e := range c.entries {
		fi, err := os.Lstat(filepath.Join(c.dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			delete(c.entries, e.name)
			continue
		}
		if err != nil {
			continue
		}
		if t := fi.ModTime(); name == "" || t.After(at) || t.Equal(at) && n < name {
			name, at = n, t
		}
	}
	return name
}

// Prefetch starts reading entry name ahead of its Load, replacing an
// earlier read-ahead.
func (c *Cache) Prefetch(name string) {
	p := &prefetch{name: name, done: make(chan struct{})}
	c.mu.Lock()
	c.ahead = p
	c.mu.Unlock()
	go func() {
		defer close(p.done)
		p.tokens, p.state, p.err = c.load(name)
	}()
}

// Prefetched is the read-ahead once it has ended well, taken from c: ok is
// false while it runs, when it failed (logged by its Load), or when there
// is none. It never waits.
func (c *Cache) Prefetched() (name string, tokens []int32, state []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.ahead
	if p == nil {
		return "", nil, nil, false
	}
	select {
	case <-p.done:
	default:
		return "", nil, nil, false
	}
	c.ahead = nil
	if p.err != nil {
		return "", nil, nil, false
	}
	return p.name, p.tokens, p.state, true
}

// Ahead is closed when the read-ahead ends; nil (never ready) when there
// is none.
func (c *Cache) Ahead() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahead == nil {
		return nil
	}
	return c.ahead.done
}

// takeAhead removes the read-ahead and returns it when it is of name
// (waiting for it to end); a read-ahead of another entry is dropped.
func (c *Cache) takeAhead(name string) *prefetch {
	c.mu.Lock()
	p := c.ahead
	c.ahead = nil
	c.mu.Unlock()
	if p == nil || p.name != name {
		return nil
	}
	<-p.done
	return p
}
