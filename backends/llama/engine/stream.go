package engine

import "sync"

// stream carries one request's events from the scheduler to the caller. The
// scheduler never blocks on it (events queue up without bound), so a slow
// reader slows only itself, not the other sequences of the batch.
type stream struct {
	mu      sync.Mutex
	pending []Event
	closed  bool
	wake    chan struct{}
	out     chan Event
}

func newStream() *stream {
	return &stream{wake: make(chan struct{}, 1), out: make(chan Event)}
}

// push queues an event; it never blocks.
func (s *stream) push(ev Event) {
	s.mu.Lock()
	s.pending = append(s.pending, ev)
	s.mu.Unlock()
	s.signal()
}

// end queues the final event and closes the stream.
func (s *stream) end(ev Event) {
	s.mu.Lock()
	s.pending = append(s.pending, ev)
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump delivers queued events to out in order and closes out after the
// final one. It runs in its own goroutine and ends once the reader has
// taken the final event.
func (s *stream) pump() {
	for range s.wake {
		s.mu.Lock()
		evs, closed := s.pending, s.closed
		s.pending = nil
		s.mu.Unlock()
		for _, ev := range evs {
			s.out <- ev
		}
		if closed {
			close(s.out)
			return
		}
	}
}
