package llama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// The stall watchdog of a runner.
//
// A runner can stop making progress without exiting: stopped (SIGSTOP, a
// debugger, a frozen cgroup), deadlocked, or stuck inside one llama_decode.
// An exit is what the cache and the streams already handle (Done, a
// *RunnerExitError, an error event carrying the cause), so the watchdog
// turns a stall into an exit: it SIGKILLs the runner, whose exit error then
// says that it stalled, and the next request loads the model again.
//
// While the daemon has work in flight with the runner (a stream open, a call
// waiting for its answer), the watchdog pings it (GET /stats) and tells two
// failure modes apart:
//   - unresponsive: nothing comes back at all (no stream event, no call's
//     answer, no answer to a ping) for RunnerOptions.StallTimeout: the
//     process is stopped or every thread is blocked. A healthy runner
//     answers a ping from its HTTP goroutines within milliseconds whatever
//     its decode loop does, so this timeout can be short (20 s by default).
//     Long before it, after a quarter of it, the runner is reported
//     unresponsive (Health): new calls fail at once with a
//     *RunnerUnresponsiveError (503 with a retry-after) instead of queueing
//     behind a dead process, and the cache refuses its queue the same way.
//   - wedged: pings are answered, but the scheduler holds requests and its
//     decode step counter stands still for RunnerOptions.StepTimeout
//     (three stall timeouts by default). Each prompt chunk is one decode
//     step, so a long prefill moves the counter once per chunk; only a
//     single decode step longer than that is a stall (a full batch of a very
//     large model on a slow CPU: raise the timeout for those).
//
// A slow client is not a stall: the scheduler never waits for readers, its
// steps go on while the stream's events queue up. An idle runner is not
// watched: a stopped idle runner holds nobody up, and the first request to
// it finds it out within the timeout.

// DefaultStallTimeout is RunnerOptions.StallTimeout's default.
const DefaultStallTimeout = 20 * time.Second

// stepTimeoutFactor gives RunnerOptions.StepTimeout's default from the
// stall timeout.
const stepTimeoutFactor = 3

// ErrRunnerStalled: the runner made no progress for the stall timeout while
// it had work, and was killed. A *RunnerExitError with Stalled set wraps it.
var ErrRunnerStalled = backends.ErrRunnerStalled

// ErrRunnerUnresponsive is wrapped by *RunnerUnresponsiveError.
var ErrRunnerUnresponsive = errors.New("runner not responding")

// RunnerUnresponsiveError refuses a call to a runner that has answered
// nothing for a while (stopped or hung): the watchdog kills it once the
// stall timeout is reached, and the next request after that loads the
// model again. It is a 503 with a retry-after.
type RunnerUnresponsiveError struct {
	PID        int
	Silent     time.Duration // since its last answer
	KillAfter  time.Duration // the stall timeout
	RetryAfter time.Duration
}

func (e *RunnerUnresponsiveError) Error() string {
	return fmt.Sprintf("llama: the model's runner (process %d) has not responded for %s; it is killed and reloaded after %s without an answer; retry after %s",
		e.PID, e.Silent.Round(time.Second), formatStall(e.KillAfter), e.RetryAfter.Round(time.Second))
}

func (e *RunnerUnresponsiveError) Unwrap() error     { return ErrRunnerUnresponsive }
func (e *RunnerUnresponsiveError) HTTPStatus() int   { return http.StatusServiceUnavailable }
func (e *RunnerUnresponsiveError) ErrorCode() string { return "model_unresponsive" }
func (e *RunnerUnresponsiveError) RetryAfterDuration() time.Duration {
	return max(e.RetryAfter, time.Second)
}

// liveness counts the daemon's work in flight with a runner and remembers
// when the runner last answered and last made progress. Its methods are
// safe for concurrent use.
type liveness struct {
	epoch    time.Time    // the fields below hold time.Since(epoch): monotonic readings
	answer   atomic.Int64 // at the last answer of any kind
	step     atomic.Int64 // at the last progress: an event, an answer, a ping showing steps or idleness
	inflight atomic.Int64
}

func newLiveness() *liveness { return &liveness{epoch: time.Now()} }

func (l *liveness) now() int64 { return int64(time.Since(l.epoch)) }

// progress records that the runner did something.
func (l *liveness) progress() {
	n := l.now()
	l.answer.Store(n)
	l.step.Store(n)
}

// answered records that the runner answered a ping, without progress.
func (l *liveness) answered() { l.answer.Store(l.now()) }

// begin marks a call or stream as started. When nothing was in flight the
// silence before it was idle time, not a stall, and the clocks start
// afresh; when the runner was already busy they go on, so that requests
// arriving at a stuck runner do not put off finding it out.
func (l *liveness) begin() {
	if l.inflight.Add(1) == 1 {
		l.progress()
	}
}

// end marks a call or stream as ended; its answer was progress.
func (l *liveness) end() {
	l.progress()
	l.inflight.Add(-1)
}

func (l *liveness) busy() bool { return l.inflight.Load() > 0 }

// unanswered is how long ago the last answer was; stuck how long ago the
// last progress was.
func (l *liveness) unanswered() time.Duration { return time.Duration(l.now() - l.answer.Load()) }
func (l *liveness) stuck() time.Duration      { return time.Duration(l.now() - l.step.Load()) }

// watchInterval is how often the watchdog looks, for a stall timeout d: a
// stall is found between d and d + d/8 (at most 2 s more) after the last
// answer.
func watchInterval(d time.Duration) time.Duration {
	return min(max(d/8, 10*time.Millisecond), 2*time.Second)
}

// suspectAfter is how long a busy runner may give no answer before it is
// reported unresponsive, for a stall timeout d.
func suspectAfter(d time.Duration) time.Duration { return d / 4 }

// health is what Health reports, and a channel closed when it changes.
type health struct {
	mu      sync.Mutex
	err     error
	changed chan struct{}
}

func (h *health) get() (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed, h.err
}

func (h *health) current() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// set replaces the state; a change between nil and an error is announced
// (a refreshed error of the same kind is not).
func (h *health) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	announce := (h.err == nil) != (err == nil)
	h.err = err
	if announce && h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}

// Health reports whether the runner answers: nil while it does (or is
// idle), a *RunnerUnresponsiveError while it has work and has answered
// nothing for a quarter of the stall timeout. changed is closed at the next
// change. Once the runner exited, Done and Err say so instead.
func (r *Runner) Health() (changed <-chan struct{}, err error) { return r.health.get() }

// watch is the stall watchdog (see above); it ends when the runner exits or
// is closed.
func (r *Runner) watch() {
	stall, step := r.opts.StallTimeout, r.opts.StepTimeout
	tick := time.NewTicker(watchInterval(stall))
	defer tick.Stop()
	defer r.health.set(nil)
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
				r.live.answered()
				if p.st.Active+p.st.Waiting == 0 || p.st.DecodeCalls != steps {
					r.live.progress()
				}
				steps = p.st.DecodeCalls
				r.health.set(nil)
			}
			continue
		case <-tick.C:
		}
		if !r.live.busy() {
			r.health.set(nil)
			continue
		}
		unanswered, stuck := r.live.unanswered(), r.live.stuck()
		switch {
		case unanswered >= stall:
			r.stall(stall, unanswered, "no answer")
			return
		case stuck >= step:
			r.stall(step, stuck, "no decode step")
			return
		case unanswered >= suspectAfter(stall):
			r.health.set(&RunnerUnresponsiveError{PID: r.proc.pid, Silent: unanswered, KillAfter: stall,
				RetryAfter: stall - unanswered + 2*time.Second})
		}
		if !pinging {
			pinging = true
			go func() {
				st, err := r.ping(ctx, stall)
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

// stall kills a runner that gave no answer, or made no decode step, for
// silent (past its timeout).
func (r *Runner) stall(timeout, silent time.Duration, what string) {
	if r.closing.Load() {
		return
	}
	r.opts.Logger.Error("llama: runner stalled; killing it", "model_path", r.opts.ModelPath, "pid", r.proc.pid,
		"stalled", what, "silent", silent.Round(time.Millisecond), "timeout", timeout, "in_flight", r.live.inflight.Load())
	r.proc.killStalled(timeout)
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
