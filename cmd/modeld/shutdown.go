package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modeld/modeld/api/core"
)

// How the daemon stops (SIGTERM, Ctrl-C):
//
//  1. It stops accepting: the listener closes, idle connections close.
//  2. Requests in flight get Config.ShutdownGrace to finish.
//  3. Then the context every request derives from is cancelled with
//     core.ErrShuttingDown: a live stream ends with an error event in the
//     dialect's shape (no [DONE]), any other request gets a 503; a chat
//     sequence stops within one decode step.
//  4. Handlers get cutWait to write that; connections still open then are
//     closed.
//  5. serve's deferred unload stops every runner (cache.Close), and the home
//     lock is released.
//
// With the default grace of 2s the daemon is gone about 2s after the signal,
// live streams or not.

// cutWait bounds how long the handlers of cut requests may take to answer.
const cutWait = 2 * time.Second

// requestBase is the context of every request (http.Server.BaseContext);
// cut cancels it with core.ErrShuttingDown.
type requestBase struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newRequestBase() *requestBase {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &requestBase{ctx: ctx, cancel: cancel}
}

// base is the http.Server.BaseContext.
func (b *requestBase) base(net.Listener) context.Context { return b.ctx }

// cut ends every request still running.
func (b *requestBase) cut() { b.cancel(core.ErrShuttingDown) }

// drain stops hs as described above; reqs must be hs's BaseContext. It
// returns once no handler runs any more, or after grace + cutWait with the
// connections closed.
func drain(hs *http.Server, reqs *requestBase, grace time.Duration, log *slog.Logger) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- hs.Shutdown(ctx) }()
	wait := func(d time.Duration) (bool, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case err := <-stopped:
			return true, err
		case <-t.C:
			return false, nil
		}
	}
	done, err := wait(grace)
	if !done {
		log.Info("shutdown grace over; ending the requests still running", "grace", grace)
		reqs.cut()
		if done, err = wait(cutWait); !done {
			log.Warn("requests still running after they were ended; closing their connections", "waited", cutWait)
			cancel() // Shutdown returns
			err = errors.Join(<-stopped, hs.Close())
		}
	}
	reqs.cut() // nothing runs now; release the context
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	log.Info("requests drained", "took", time.Since(start).Round(time.Millisecond))
}
