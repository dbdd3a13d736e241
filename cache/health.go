package cache

import (
	"errors"
	"fmt"
)

// Ailing is implemented by instances that can tell that they stopped
// answering before they die: a runner process that is stopped or hung,
// which its watchdog will kill. Health returns nil while the instance
// serves, else the error to give requests at once (say a 503 with a
// retry-after, through the error's own methods); changed is closed at the
// next change.
type Ailing interface {
	Health() (changed <-chan struct{}, err error)
}

// ErrUnresponsive is wrapped by the error Acquire returns for a model whose
// instance reports that it does not answer.
var ErrUnresponsive = errors.New("model not responding")

// unresponsiveError refuses a request to an instance that does not answer:
// it wraps ErrUnresponsive and the instance's own error, whose methods say
// its HTTP meaning and when to retry.
type unresponsiveError struct {
	id  string
	err error
}

func (e *unresponsiveError) Error() string   { return fmt.Sprintf("model %q: %v", e.id, e.err) }
func (e *unresponsiveError) Unwrap() []error { return []error{ErrUnresponsive, e.err} }

// watchHealth follows an ailing instance's health: while it does not
// answer, its queue is refused at once and Acquire refuses new requests
// (they would only wait on a dead process until its watchdog kills it);
// once it answers again, it serves as before. It ends when e is retired.
func (c *Cache) watchHealth(e *entry, a Ailing) {
	for {
		changed, err := a.Health()
		c.mu.Lock()
		if e.retired {
			c.mu.Unlock()
			return
		}
		was := e.ailing
		e.ailing = nil
		if err != nil {
			e.ailing = &unresponsiveError{id: e.id, err: err}
			for e.queue.Len() > 0 {
				c.decideLocked(e, e.ailing)
			}
		}
		switch {
		case err != nil && was == nil:
			c.log.Warn("model not responding; refusing its requests until it answers or is replaced", "id", e.id, "err", err, "in_flight", e.inUse)
			c.notifyLocked()
		case err == nil && was != nil:
			c.log.Info("model responding again", "id", e.id)
			c.notifyLocked()
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-e.stop:
			return
		}
	}
}

// freshUnresponsive is the refusal of a request to an ailing instance, with
// the instance's current error (its silence and retry-after move on), or
// last when it has just recovered. It calls the instance: not under c.mu.
func freshUnresponsive(id string, a Ailing, last error) error {
	if _, err := a.Health(); err != nil {
		return &unresponsiveError{id: id, err: err}
	}
	return last
}
