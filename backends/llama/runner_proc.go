package llama

import (
	"github.com/modeld/modeld/backends/llama/wire"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modeld/modeld/backends"
)

// ErrRunnerExited: the runner process of a model exited. The error that
// wraps it is a *RunnerExitError with the exit status and stderr's tail.
var ErrRunnerExited = backends.ErrRunnerDied

// RunnerExitError says how a runner process ended on its own (not by
// Runner.Close): backends' RunnerDiedError, with Backend "llama".
type RunnerExitError = backends.RunnerDiedError

// stderrTail is how much of a runner's output is kept for error messages.
const stderrTail = 4096

// process is a started runner process: its pipes, its output and its end.
// A goroutine locked to one OS thread starts it and waits for it, so the
// thread that forked it (which the Linux parent-death signal is tied to)
// lives exactly as long as the child.
type process struct {
	cmd   *exec.Cmd
	pid   int
	stdin io.WriteCloser
	tail  *tailBuffer

	status chan wire.Status // the start line from stdout, buffered 1

	crash   crashCapture // a Go runtime crash on stderr
	reports crashReports
	log     *slog.Logger

	ready     atomic.Bool            // the runner reported it serves
	stopping  atomic.Bool            // set by stop: the exit is expected
	stalled   atomic.Int64           // set by killStalled: the stall timeout
	killedFor atomic.Pointer[string] // set by killFor: why the daemon killed it
	done      chan struct{}
	exitErr   error // set before done is closed
	waitErr   error // Wait's own error, set before done is closed
	exitedErr error // onExit's error, set before done is closed
}

// startProcess starts argv with the runner's pipes. onExit runs after the
// process is reaped and its output read, before done is closed; its error
// is stop's.
func startProcess(argv, env []string, log *slog.Logger, reports crashReports, onExit func() error) (*process, error) {
	p := &process{
		tail:    &tailBuffer{max: stderrTail},
		status:  make(chan wire.Status, 1),
		done:    make(chan struct{}),
		reports: reports,
		log:     log,
	}
	var pid atomic.Int64
	logLine := func(stream, line string) {
		if rec, ok := parseRunnerRecord(line); ok {
			p.tail.addLine(rec.text())
			p.crash.record(rec.text())
			rec.log(log, pid.Load())
			return
		}
		// A goroutine dump stays out of the tail and the log: it goes
		// to the crash report, and only its header is the cause.
		if inDump, header := p.crash.line(line); inDump {
			if header {
				p.tail.addLine(line)
			}
			return
		}
		p.tail.addLine(line)
		log.Debug("llama runner output", "pid", pid.Load(), "stream", stream, "line", line)
	}
	stderr := &lineWriter{fn: func(l string) { logLine("stderr", l) }}
	stdout := &lineWriter{fn: func(l string) {
		if st, ok := parseStatus(l); ok {
			if st.Ready {
				p.ready.Store(true)
			}
			select {
			case p.status <- st:
			default:
			}
			return
		}
		logLine("stdout", l)
	}}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(runnerEnviron(os.Environ()), env...) // never HF_TOKEN and other secrets
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = runnerSysProcAttr()
	cmd.WaitDelay = time.Second // a grandchild holding the pipes must not block Wait
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("llama: runner stdin: %w", err)
	}
	p.cmd, p.stdin = cmd, in

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		pid.Store(int64(cmd.Process.Pid))
		p.pid = cmd.Process.Pid
		started <- nil
		werr := cmd.Wait()
		stdout.flush()
		stderr.flush()
		p.waitErr = werr
		p.exitErr = p.describeExit(werr)
		if onExit != nil {
			p.exitedErr = onExit()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		_ = in.Close()
		return nil, fmt.Errorf("llama: start runner %s: %w", argv[0], err)
	}
	return p, nil
}

// describeExit turns Wait's result into the error Runner.Err reports.
func (p *process) describeExit(werr error) error {
	if p.stopping.Load() {
		return ErrClosed
	}
	status := exitStatus(p.cmd.ProcessState, werr)
	stalled := time.Duration(p.stalled.Load())
	var cause string
	switch why := p.killedFor.Load(); {
	case why != nil:
		cause = *why
		p.log.Error("llama: runner killed", "pid", p.pid, "cause", cause)
	case stalled == 0:
		cause = p.report(p.log, status, p.ready.Load())
	}
	return &RunnerExitError{Backend: "llama", PID: p.pid, Status: status, Cause: cause, Stderr: p.tail.String(), Stalled: stalled}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process politely (SIGTERM, SIGCONT in case it was stopped,
// stdin closed), then with SIGKILL after grace, and waits until it is
// reaped. SIGTERM goes first, so a runner mostly sees it before stdin's
// EOF; one that saw the EOF first ignores the SIGTERM on its way out
// (cmd/modeld's runner command) rather than die of it. The error says what did not go cleanly: the
// signal could not be sent or stdin closed, the process had to be killed,
// it exited with another status than 0 (or Wait failed), or onExit's
// cleanup failed. A process that had already ended on its own reports no
// exit error here: that end is exitErr's.
func (p *process) stop(grace time.Duration) error {
	gone := p.exited()
	p.stopping.Store(true)
	var errs []error
	if !gone {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("llama: runner %d: SIGTERM: %w", p.pid, err))
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped runner acts on it too
	}
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		errs = append(errs, fmt.Errorf("llama: runner %d: closing its stdin: %w", p.pid, err))
	}
	killed := false
	if !p.exited() {
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
			killed = true
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("llama: runner %d: SIGKILL: %w", p.pid, err))
			}
			<-p.done
		}
		t.Stop()
	}
	switch {
	case gone:
	case killed:
		errs = append(errs, fmt.Errorf("llama: runner %d did not exit within %s of SIGTERM; killed%s", p.pid, grace, tailSuffix(p.tail.String())))
	case p.waitErr != nil:
		errs = append(errs, fmt.Errorf("llama: runner %d ended its shutdown with %s: %w%s", p.pid,
			exitStatus(p.cmd.ProcessState, p.waitErr), p.waitErr, tailSuffix(p.tail.String())))
	}
	if p.exitedErr != nil {
		errs = append(errs, fmt.Errorf("llama: runner %d: %w", p.pid, p.exitedErr))
	}
	return errors.Join(errs...)
}

// killStalled kills a process that made no progress for timeout; its exit
// error says so.
func (p *process) killStalled(timeout time.Duration) {
	p.stalled.Store(int64(timeout))
	p.kill()
}

// killFor kills a process that broke the protocol; its exit error gives
// why as its cause.
func (p *process) killFor(why string) {
	p.killedFor.CompareAndSwap(nil, &why)
	p.kill()
}

// kill ends the process at once and waits until it is reaped.
func (p *process) kill() {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Kill()
	<-p.done
}

func parseStatus(line string) (wire.Status, bool) {
	rest, ok := strings.CutPrefix(line, wire.StatusPrefix)
	if !ok {
		return wire.Status{}, false
	}
	var st wire.Status
	if err := json.Unmarshal([]byte(rest), &st); err != nil || (!st.Ready && st.Error == nil) {
		return wire.Status{}, false
	}
	return st, true
}

// lineWriter calls fn with each complete line written to it (without the
// newline); flush hands over a last unterminated line. exec.Cmd's copying
// goroutine is its only writer until Wait returns.
type lineWriter struct {
	buf []byte
	fn  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.fn(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	// Bound a line that never ends.
	if len(w.buf) > 64<<10 {
		w.fn(string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.fn(string(w.buf))
		w.buf = nil
	}
}

// tailBuffer keeps the last max bytes of the lines added to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool // bytes were dropped from the front
}

func (t *tailBuffer) addLine(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
}

// String is the kept text, starting at a line boundary when the front was
// cut, without the final newline.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	b := bytes.Clone(t.buf)
	cut := t.cut
	t.mu.Unlock()
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return strings.ToValidUTF8(strings.TrimRight(string(b), "\n"), "\uFFFD")
}

// runnerRecord is one log record of a runner: the runner logs JSON lines
// to stderr (runner.Main), which the daemon logs again as records of its
// own, at the runner's level, with the runner's attributes in the group
// "runner" (so that none repeats a key of the daemon's logger). Lines that
// are not such a record (native code writing to stderr) are logged as they
// are, at debug.
type runnerRecord struct {
	level slog.Level
	msg   string
	attrs []slog.Attr // in the order the runner wrote them
}

func parseRunnerRecord(line string) (runnerRecord, bool) {
	var rec runnerRecord
	if !strings.HasPrefix(line, "{") {
		return rec, false
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return rec, false
	}
	seenMsg := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return rec, false
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return rec, false
		}
		switch key {
		case slog.TimeKey:
		case slog.LevelKey:
			s, _ := v.(string)
			if err := rec.level.UnmarshalText([]byte(s)); err != nil {
				return rec, false
			}
		case slog.MessageKey:
			rec.msg, _ = v.(string)
			seenMsg = true
		default:
			rec.attrs = append(rec.attrs, slog.Any(key, v))
		}
	}
	return rec, seenMsg
}

// log logs the record on the daemon's logger.
func (r runnerRecord) log(log *slog.Logger, pid int64) {
	attrs := []slog.Attr{slog.Int64("pid", pid)}
	if len(r.attrs) > 0 {
		args := make([]any, len(r.attrs))
		for i, a := range r.attrs {
			args[i] = a
		}
		attrs = append(attrs, slog.Group("runner", args...))
	}
	log.LogAttrs(context.Background(), r.level, r.msg, attrs...)
}

// text is the record as the exit error's output tail shows it.
func (r runnerRecord) text() string {
	var b strings.Builder
	b.WriteString(r.level.String() + " " + r.msg)
	for _, a := range r.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return b.String()
}
