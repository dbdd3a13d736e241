package llama

import (
	"github.com/modeld/modeld/backends/llama/wire"

	"github.com/modeld/modeld/backends"

	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// The stall watchdog of a runner.
//
// A runner can stop making progress without exiting: stopped (SIGSTOP, a
// debugger, a frozen cgroup), deadlocked, or stuck inside one llama_decode.
// An exit is what the cache and the streams already handle (Done, a
// *RunnerExitError, an error event carrying stderr's tail), so the watchdog
// turns a stall into an exit: it SIGKILLs the runner, whose exit error then
// says that it stalled, and the next request loads the model again.
//
// While the daemon has work in flight with the runner (a stream open, a call
// waiting for its answer), each of these counts as progress:
//   - a stream event or a call's answer arriving;
//   - an answer to the watchdog's ping (GET /stats) showing the scheduler
//     idle, or with more decode steps than at the previous answer.
//
// The ping is answered by the runner's HTTP goroutines, not by its decode
// loop, which tells the two failure modes apart: a process that answers
// nothing (stopped, every thread blocked) fails the ping; a process whose
// decode loop is stuck still answers, but its step counter stands still
// while it holds requests. A runner that sent progress frames from its
// decode loop would catch only the second, and one answering pings alone
// only the first. Each prompt chunk is one decode step, so a long prefill
// moves the counter once per chunk and is not a stall; only a single decode
// step longer than the timeout is (a full batch of a very large model on a
// slow CPU: raise the timeout for those). A slow client is not a stall
// either: the scheduler never waits for readers, its steps go on while the
// stream's events queue up. An idle runner is not watched: a stopped idle
// runner holds nobody up, and the first request to it finds it out within
// the timeout.

// DefaultStallTimeout is RunnerOptions.StallTimeout's default.
const DefaultStallTimeout = 60 * time.Second

// ErrRunnerStalled: the runner made no progress for the stall timeout while
// it had work, and was killed. A *RunnerExitError with Stalled set wraps it.
var ErrRunnerStalled = backends.ErrRunnerStalled

// liveness counts the daemon's work in flight with a runner and remembers
// when the runner last made progress. Its methods are safe for concurrent
// use.
type liveness struct {
	epoch    time.Time    // last holds time.Since(epoch): a monotonic reading
	last     atomic.Int64 // at the last progress
	inflight atomic.Int64
}

func newLiveness() *liveness { return &liveness{epoch: time.Now()} }

// progress records that the runner did something.
func (l *liveness) progress() { l.last.Store(int64(time.Since(l.epoch))) }

// begin marks a call or stream as started: the silence before it was idle
// time, not a stall.
func (l *liveness) begin() {
	l.progress()
	l.inflight.Add(1)
}

// end marks a call or stream as ended; its answer was progress.
func (l *liveness) end() {
	l.progress()
	l.inflight.Add(-1)
}

func (l *liveness) busy() bool { return l.inflight.Load() > 0 }

// silent is how long ago the last progress was.
func (l *liveness) silent() time.Duration {
	return time.Since(l.epoch) - time.Duration(l.last.Load())
}

// watchInterval is how often the watchdog looks, for a stall timeout d: a
// stall is found between d and d + d/4 after the last progress.
func watchInterval(d time.Duration) time.Duration {
	return min(max(d/4, 10*time.Millisecond), 5*time.Second)
}

// watch is the stall watchdog (see above); it ends when the runner exits or
// is closed.
func (r *Runner) watch() {
	timeout := r.opts.StallTimeout
	tick := time.NewTicker(watchInterval(timeout))
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type pong struct {
		st  Stats
		err error
	}
	pongs := make(chan pong, 1)
	pinging := false
	var steps uint64
	for {
		select {
		case <-r.proc.done:
			return
		case <-r.unwatch:
			return
		case p := <-pongs:
			pinging = false
			if p.err == nil {
				if p.st.Active+p.st.Waiting == 0 || p.st.DecodeCalls != steps {
					r.live.progress()
				}
				steps = p.st.DecodeCalls
			}
			continue
		case <-tick.C:
		}
		if !r.live.busy() {
			continue
		}
		if silent := r.live.silent(); silent >= timeout {
			r.stall(silent)
			return
		}
		if !pinging {
			pinging = true
			go func() {
				st, err := r.ping(ctx, timeout)
				pongs <- pong{st, err}
			}()
		}
	}
}

// ping asks the runner for its scheduler's state, bounded by limit. It is
// not work in flight: only calls made for callers are.
func (r *Runner) ping(ctx context.Context, limit time.Duration) (Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	b, err := r.roundTrip(ctx, "GET", wire.RouteStats, nil, nil)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	if err := json.Unmarshal(b, &st); err != nil {
		return Stats{}, fmt.Errorf("llama: runner ping reply: %w", err)
	}
	return st, nil
}

// stall kills a runner that made no progress for silent.
func (r *Runner) stall(silent time.Duration) {
	if r.closing.Load() {
		return
	}
	r.opts.Logger.Error("llama: runner stalled; killing it", "model_path", r.opts.ModelPath, "pid", r.proc.pid,
		"silent", silent.Round(time.Millisecond), "stall_timeout", r.opts.StallTimeout, "in_flight", r.live.inflight.Load())
	r.proc.killStalled(r.opts.StallTimeout)
}

// formatStall renders a stall timeout the way people write it: "60s",
// "1.5s", "2m".
func formatStall(d time.Duration) string {
	switch {
	case d%time.Minute == 0 && d >= 2*time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
