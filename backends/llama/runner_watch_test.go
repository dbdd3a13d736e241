package llama

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
	"github.com/modeld/modeld/internal/ggufgen"
)

// stallRunner starts a test runner whose stall timeout is stall.
func stallRunner(t *testing.T, stall time.Duration, env ...string) *Runner {
	t.Helper()
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	opts := runnerOpts(t, path, Options{Slots: 1, ContextSize: 512}, env...)
	opts.StallTimeout = stall
	r, err := StartRunner(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(r.PID(), syscall.SIGCONT) // a failed test may leave it stopped
		_ = r.Close()
		if processAlive(r.PID()) {
			t.Errorf("runner %d still alive after Close", r.PID())
		}
	})
	return r
}

// checkStalled checks that a stream ended because the watchdog killed its
// runner, in time, and that the runner is gone.
func checkStalled(t *testing.T, r *Runner, ch <-chan Event, stall time.Duration) {
	t.Helper()
	since := time.Now()
	evs := collect(t, ch)
	took := time.Since(since)
	t.Logf("stall found and the stream ended %s after the runner stopped progressing (stall timeout %s)", took.Round(time.Millisecond), stall)
	final := evs[len(evs)-1]
	if final.Finish != FinishError || !errors.Is(final.Err, ErrRunnerStalled) || !errors.Is(final.Err, ErrRunnerExited) {
		t.Fatalf("final event %+v, want an error wrapping ErrRunnerStalled and ErrRunnerExited", final)
	}
	want := "runner stalled: no progress for " + formatStall(stall) + ", killed"
	if !strings.Contains(final.Err.Error(), want) || !strings.Contains(final.Err.Error(), "llama runner: ready") {
		t.Errorf("error %q does not say %q with the stderr tail", final.Err, want)
	}
	// The watchdog looks every stall/4; 2s more covers a loaded machine.
	if limit := stall + stall/4 + 2*time.Second; took > limit {
		t.Errorf("the stream ended %s after the stall, want at most %s", took, limit)
	}
	<-r.Done()
	if processAlive(r.PID()) {
		t.Errorf("stalled runner %d still alive", r.PID())
	}
	var ee *RunnerExitError
	if !errors.As(r.Err(), &ee) || ee.Stalled != stall || ee.Status != "killed by SIGKILL" {
		t.Errorf("Err() = %#v, want a RunnerExitError of a stall killed by SIGKILL", r.Err())
	}
	if _, err := r.Tokenize("hello", true, false); !errors.Is(err, ErrRunnerStalled) {
		t.Errorf("tokenize on the stalled runner: %v", err)
	}
}

// TestRunnerStallStopped: a runner stopped mid-stream (SIGSTOP: it answers
// nothing, not even pings) is killed after the stall timeout and its stream
// ends with an error that names the stall.
func TestRunnerStallStopped(t *testing.T) {
	const stall = time.Second
	r := stallRunner(t, stall, envTokenDelay+"=20ms")
	prompt, _ := r.Tokenize("Hello world", true, false)
	ch := mustGenerate(t, r, Request{Prompt: prompt, MaxTokens: 400}) // 8s of tokens
	takeTokens(t, ch, 3)
	if err := syscall.Kill(r.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	checkStalled(t, r, ch, stall)
}

// TestRunnerStallWedgedLoop: a runner whose decode loop is stuck (here:
// paused inside a token's hook) still answers pings from its HTTP
// goroutines, but its decode steps stand still while it holds a request:
// that is a stall too.
func TestRunnerStallWedgedLoop(t *testing.T) {
	const stall = time.Second
	r := stallRunner(t, stall, envPauseAt+"=3")
	prompt, _ := r.Tokenize("Hello world", true, false)
	ch := mustGenerate(t, r, Request{Prompt: prompt, MaxTokens: 100})
	takeTokens(t, ch, 3)
	checkStalled(t, r, ch, stepTimeoutFactor*stall) // it answers pings: the step timeout applies
}

// TestRunnerSlowIsNoStall: a runner slower than the stall timeout in total
// but making progress all along is left alone.
func TestRunnerSlowIsNoStall(t *testing.T) {
	// Tokens 150 ms apart against a 2 s timeout: a margin that a loaded
	// machine's scheduling delays do not eat.
	const stall = 2 * time.Second
	r := stallRunner(t, stall, envTokenDelay+"=150ms")
	prompt, _ := r.Tokenize("Hello world", true, false)
	evs := collect(t, mustGenerate(t, r, Request{Prompt: prompt, MaxTokens: 20})) // 3s
	if f := evs[len(evs)-1]; f.Finish != FinishLength || len(evs) != 21 {
		t.Fatalf("slow stream ended with %+v after %d events, want 20 tokens and length", f, len(evs))
	}
	if err := r.Err(); err != nil {
		t.Fatalf("slow runner: %v", err)
	}
}

// fakeStats serves /stats on a unix socket with the answer reply gives, and
// reports each ping on pings.
func fakeStats(t *testing.T, reply func(ctx context.Context) (Stats, bool)) (socket string, pings <-chan struct{}) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1024)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.RouteStats {
			http.NotFound(w, r)
			return
		}
		ch <- struct{}{}
		st, ok := reply(r.Context())
		if ok {
			_ = json.NewEncoder(w).Encode(st)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket, ch
}

// watched starts the watchdog over a stand-in process (sleep) that answers
// /stats as reply says, with one call in flight.
func watched(t *testing.T, stall time.Duration, reply func(ctx context.Context) (Stats, bool)) (*Runner, <-chan struct{}) {
	t.Helper()
	socket, pings := fakeStats(t, reply)
	log := slog.New(slog.DiscardHandler)
	proc, err := startProcess([]string{"sleep", "600"}, nil, log, crashReports{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{
		opts: RunnerOptions{ModelPath: "stand-in", StallTimeout: stall, StepTimeout: stepTimeoutFactor * stall, StopGrace: time.Second, Logger: log},
		proc: proc, client: unixClient(socket), live: newLiveness(), unwatch: make(chan struct{}),
	}
	t.Cleanup(func() { _ = r.Close() })
	r.live.begin()
	go r.watch()
	return r, pings
}

func waitPings(t *testing.T, r *Runner, pings <-chan struct{}, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-pings:
		case <-r.Done():
			t.Fatalf("killed after %d pings: %v", i, r.Err())
		case <-time.After(hangCeiling):
			t.Fatalf("no ping %d", i+1)
		}
	}
}

// TestWatchdogProgress: what the watchdog counts as progress from its pings
// (decode steps moving on, an idle scheduler) keeps a runner alive for many
// stall timeouts; a frozen step counter while requests are held, or pings
// left unanswered, get it killed, not before the timeout.
func TestWatchdogProgress(t *testing.T) {
	// Pings every 250 ms against a 1 s timeout: a ping delayed by a busy
	// machine is still well inside it.
	const stall = time.Second
	pingsPerStall := int(stall / watchInterval(stall))
	t.Run("steps advance", func(t *testing.T) {
		var steps atomic.Uint64
		r, pings := watched(t, stall, func(context.Context) (Stats, bool) {
			return Stats{Slots: 1, Active: 1, DecodeCalls: steps.Add(1)}, true
		})
		waitPings(t, r, pings, 3*pingsPerStall)
	})
	t.Run("idle scheduler", func(t *testing.T) {
		r, pings := watched(t, stall, func(context.Context) (Stats, bool) { return Stats{Slots: 1, DecodeCalls: 9}, true })
		waitPings(t, r, pings, 3*pingsPerStall)
	})
	for name, c := range map[string]struct {
		reply func(context.Context) (Stats, bool)
		after time.Duration // the timeout that applies
	}{
		"steps frozen": {func(context.Context) (Stats, bool) {
			return Stats{Slots: 1, Active: 1, Waiting: 2, DecodeCalls: 9}, true
		}, stepTimeoutFactor * stall},
		"no answer": {func(ctx context.Context) (Stats, bool) {
			<-ctx.Done()
			return Stats{}, false
		}, stall},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			r, _ := watched(t, stall, c.reply)
			select {
			case <-r.Done():
			case <-time.After(hangCeiling):
				t.Fatal("not killed")
			}
			if took := time.Since(start); took < c.after {
				t.Errorf("killed after %s, before its timeout %s", took, c.after)
			}
			var ee *RunnerExitError
			if !errors.As(r.Err(), &ee) || !errors.Is(r.Err(), ErrRunnerStalled) || ee.Stalled != c.after {
				t.Errorf("Err() = %v, want ErrRunnerStalled after %s", r.Err(), c.after)
			}
		})
	}
}

// TestWatchdogUnresponsive: a busy runner that answers nothing is reported
// unresponsive (Health) well before it is killed, and calls made to it
// meanwhile fail at once with a 503 that says when to retry, instead of
// waiting on the dead process; once it is killed, Done and Err say so.
func TestWatchdogUnresponsive(t *testing.T) {
	const stall = 4 * time.Second
	r, _ := watched(t, stall, func(ctx context.Context) (Stats, bool) {
		<-ctx.Done()
		return Stats{}, false
	})
	changed, err := r.Health()
	if err != nil {
		t.Fatalf("unresponsive at once: %v", err)
	}
	select {
	case <-changed:
	case <-r.Done():
		t.Fatalf("killed before it was reported unresponsive: %v", r.Err())
	case <-time.After(hangCeiling):
		t.Fatal("never reported unresponsive")
	}
	_, err = r.Health()
	var ue *RunnerUnresponsiveError
	if !errors.As(err, &ue) || !errors.Is(err, ErrRunnerUnresponsive) || ue.KillAfter != stall {
		t.Fatalf("Health() = %v, want a RunnerUnresponsiveError", err)
	}
	_, cerr := r.TokenizeContext(context.Background(), "hello", true, false)
	if !errors.As(cerr, &ue) {
		t.Fatalf("a call to the unresponsive runner: %v, want the unresponsive error at once", cerr)
	}
	var se backends.StatusError
	var ra backends.RetryAfterError
	if !errors.As(cerr, &se) || se.HTTPStatus() != http.StatusServiceUnavailable || !errors.As(cerr, &ra) || ra.RetryAfterDuration() < time.Second {
		t.Errorf("the refusal %v is not a 503 with a retry-after", cerr)
	}
	if _, err := r.Generate(context.Background(), Request{Prompt: []int32{1, 2}}); !errors.As(err, &ue) {
		t.Errorf("Generate on the unresponsive runner: %v", err)
	}
	select {
	case <-r.Done():
	case <-time.After(hangCeiling):
		t.Fatal("not killed")
	}
	if !errors.Is(r.Err(), ErrRunnerStalled) {
		t.Errorf("Err() = %v, want the stall", r.Err())
	}
}

// TestLivenessBeginWhileBusy: a request that starts while others are in
// flight does not restart the clocks (before, every request arriving at a
// stopped runner put off finding it out by a whole stall timeout); one that
// starts an idle runner's work does.
func TestLivenessBeginWhileBusy(t *testing.T) {
	l := newLiveness()
	l.begin()
	l.answer.Store(l.now() - int64(time.Hour))
	l.step.Store(l.now() - int64(time.Hour))
	l.begin()
	if l.unanswered() < time.Hour || l.stuck() < time.Hour {
		t.Errorf("a second request restarted the clocks: unanswered %s, stuck %s", l.unanswered(), l.stuck())
	}
	l.end()
	l.end()
	l.answer.Store(l.now() - int64(time.Hour))
	l.begin()
	if l.unanswered() >= time.Hour {
		t.Error("work starting on an idle runner kept the idle time")
	}
}

// TestWatchdogIdle: a silence longer than the timeout while nothing was in
// flight is idle time, not a stall: the next call starts the clock afresh.
func TestWatchdogIdle(t *testing.T) {
	const stall = time.Second
	var steps atomic.Uint64
	r, pings := watched(t, stall, func(context.Context) (Stats, bool) {
		return Stats{Slots: 1, Active: 1, DecodeCalls: steps.Add(1)}, true
	})
	r.live.end()
	r.live.answer.Store(int64(-10 * stall)) // idle for ten timeouts
	r.live.step.Store(int64(-10 * stall))
	if r.live.busy() {
		t.Fatal("busy with nothing in flight")
	}
	r.live.begin()
	waitPings(t, r, pings, 2*int(stall/watchInterval(stall)))
}

func TestFormatStall(t *testing.T) {
	for d, want := range map[time.Duration]string{
		60 * time.Second: "60s", time.Second: "1s", 1500 * time.Millisecond: "1.5s",
		2 * time.Minute: "2m", 90 * time.Second: "90s", 250 * time.Millisecond: "250ms",
	} {
		if got := formatStall(d); got != want {
			t.Errorf("formatStall(%s) = %q, want %q", d, got, want)
		}
	}
	e := &RunnerExitError{Backend: "llama", PID: 7, Status: "killed by SIGKILL", Stalled: time.Minute}
	if got, want := e.Error(), "llama: runner stalled: no progress for 60s, killed (process 7, killed by SIGKILL)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, ErrRunnerExited) || !errors.Is(e, ErrRunnerStalled) {
		t.Error("a stall error must wrap ErrRunnerExited and ErrRunnerStalled")
	}
	if errors.Is(&RunnerExitError{PID: 7, Status: "exit status 1"}, ErrRunnerStalled) {
		t.Error("a crash is not a stall")
	}
}

// TestRunnerCloseStopped: Close of a stopped runner (SIGSTOP) wakes it so it
// shuts down on its SIGTERM like a running one, rather than waiting out the
// grace for a SIGKILL.
func TestRunnerCloseStopped(t *testing.T) {
	r := stallRunner(t, -1) // no watchdog
	if err := syscall.Kill(r.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := r.proc.cmd.ProcessState; !st.Success() {
		t.Errorf("stopped runner ended with %v, want a clean exit on SIGTERM", st)
	}
}
