package api

import (
	"context"
	"time"

	"github.com/modeld/modeld/backends"
)

// encoder is a dialect's encoding of a streamed generation; streamEvents
// calls it. delta writes one event's text, reasoning and tool-call deltas
// (every event, the final ones included, in order); finish writes a
// choice's end from its final event, which finished; fail writes the error
// that ends the stream (the generation failed, or the daemon's shutdown cut
// it); end writes what follows the last choice's finish.
type encoder interface {
	delta(ev backends.Event)
	finish(ev backends.Event)
	fail(err error)
	end()
}

// pinger is an encoder that keeps an idle stream alive with pings every
// pingEvery.
type pinger interface {
	pingEvery() time.Duration
	ping()
}

// streamEvents is the one loop over a generation's events: it hands each
// to enc and decides once how the stream ends. n is the number of choices
// (an event of another index is dropped); the stream ends when every
// choice's final event has come or the channel closes. A cancellation ends
// it with fail when the daemon's shutdown caused it and silently when the
// client left; a failed generation ends it with fail. What is left of the
// events is drained in the background, so the backend's stream is always
// read to its end.
func streamEvents(ctx context.Context, events <-chan backends.Event, n int, enc encoder) {
	defer func() {
		go func() {
			for range events {
			}
		}()
	}()
	var tick <-chan time.Time
	if p, ok := enc.(pinger); ok {
		t := time.NewTicker(p.pingEvery())
		defer t.Stop()
		tick = t.C
	}
	for {
		var ev backends.Event
		select {
		case <-tick:
			enc.(pinger).ping()
			continue
		case e, ok := <-events:
			if !ok {
				enc.end()
				return
			}
			ev = e
		}
		if ev.Index < 0 || ev.Index >= max(n, 1) {
			continue
		}
		enc.delta(ev)
		if !ev.Done {
			continue
		}
		switch {
		case ev.Finish == backends.FinishCancelled:
			if cut := shutdownCause(ctx); cut != nil {
				enc.fail(cut)
			}
			return
		case generationError(ev) != nil:
			enc.fail(generationError(ev))
			return
		}
		enc.finish(ev)
	}
}
