package core

import (
	"context"
	"time"

	"github.com/modeld/modeld/backends"
)

// Encoder is a dialect's encoding of a streamed generation; StreamEvents
// calls it. delta writes one event's text, reasoning and tool-call deltas
// (every event, the final ones included, in order); finish writes a
// choice's end from its final event, which finished; fail writes the error
// that ends the stream (the generation failed, or the daemon's shutdown cut
// it); end writes what follows the last choice's finish.
type Encoder interface {
	Delta(ev backends.Event)
	Finish(ev backends.Event)
	Fail(err error)
	End()
}

// Pinger is an Encoder that keeps an idle stream alive with pings every
// PingEvery.
type Pinger interface {
	PingEvery() time.Duration
	Ping()
}

// StreamEvents is the one loop over a generation's events: it hands each
// to enc and decides once how the stream ends. n is the number of choices
// (an event of another index is dropped); the stream ends when every
// choice's final event has come or the channel closes. A cancellation ends
// it with fail when the daemon's shutdown caused it and silently when the
// client left; a failed generation ends it with fail. What is left of the
// events is drained in the background, so the backend's stream is always
// read to its end.
func StreamEvents(ctx context.Context, events <-chan backends.Event, n int, enc Encoder) {
	defer func() {
		go func() {
			for range events {
			}
		}()
	}()
	var tick <-chan time.Time
	if p, ok := enc.(Pinger); ok {
		t := time.NewTicker(p.PingEvery())
		defer t.Stop()
		tick = t.C
	}
	for {
		var ev backends.Event
		select {
		case <-tick:
			enc.(Pinger).Ping()
			continue
		case e, ok := <-events:
			if !ok {
				enc.End()
				return
			}
			ev = e
		}
		if ev.Index < 0 || ev.Index >= max(n, 1) {
			continue
		}
		enc.Delta(ev)
		if !ev.Done {
			continue
		}
		switch {
		case ev.Finish == backends.FinishCancelled:
			if cut := ShutdownCause(ctx); cut != nil {
				enc.Fail(cut)
			}
			return
		case GenerationError(ev) != nil:
			enc.Fail(GenerationError(ev))
			return
		}
		enc.Finish(ev)
	}
}
