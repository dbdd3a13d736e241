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
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	psprocess "github.com/shirou/gopsutil/v4/process"
)

// RunnerOptions configure StartRunner. Zero fields take the defaults.
type RunnerOptions struct {
	ModelPath string
	// LibRoot is the runtime-library root (backends.Libs.Root); the runner
	// loads llama.cpp from its llama/ directory.
	LibRoot string
	// CPUVariant is the libggml-cpu-<variant> ggml keeps on this CPU
	// (probe.Library.CPUVariant): the runner loads it alone instead of
	// opening every variant to choose ("": ggml chooses).
	CPUVariant string
	// Options are the engine's options inside the runner.
	Options Options
	// Command is the program to run and its leading arguments; the runner
	// flags follow. Default: this executable and "runner".
	Command []string
	// Env is added to this process's environment for the runner.
	Env []string
	// LoadTimeout bounds the start, model load included (default 5m).
	LoadTimeout time.Duration
	// StopGrace is how long Close waits after SIGTERM before SIGKILL
	// (default 5s).
	StopGrace time.Duration
	// CallTimeout bounds a call other than Generate (default 60s).
	CallTimeout time.Duration
	// StallTimeout: a runner that answers nothing this long while it has
	// work in flight is killed (see runner_watch.go; default 20s, negative:
	// never).
	StallTimeout time.Duration
	// StepTimeout: a runner that answers but makes no decode step this long
	// while it holds requests is killed (default: three stall timeouts).
	StepTimeout time.Duration
	// Name names the model in crash reports' file names (default: the
	// model file's name).
	Name string
	// CrashDir receives the Go runtime's dump of a runner that crashed
	// (panic, fatal error, signal), one private file per crash, the newest
	// maxCrashReports kept; "" keeps none (the dump is dropped, the cause
	// still reported).
	CrashDir string
	// LogLevel is the runner's own log level.
	LogLevel slog.Level
	// Logger receives the runner's output, one record per line at debug
	// level (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of RunnerOptions.
const (
	DefaultLoadTimeout = 5 * time.Minute
	DefaultStopGrace   = 5 * time.Second
	DefaultCallTimeout = 60 * time.Second
)

// deathWait bounds how long a broken call waits for the runner's exit to
// be reported, so its error can carry the exit status and stderr's tail.
const deathWait = 5 * time.Second

func (o RunnerOptions) withDefaults() (RunnerOptions, error) {
	if o.ModelPath == "" {
		return o, errors.New("llama: StartRunner: no model path")
	}
	if o.LibRoot == "" {
		return o, errors.New("llama: StartRunner: no runtime-library root")
	}
	if len(o.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("llama: StartRunner: find own executable: %w", err)
		}
		o.Command = []string{exe, "runner"}
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = DefaultLoadTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = stepTimeoutFactor * o.StallTimeout
	}
	if o.Name == "" {
		o.Name = filepath.Base(o.ModelPath)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Runner is a model served by a runner process (`modeld runner`): the same
// methods as Model, with the same errors (errors.Is / errors.As work on
// both), over a unix socket. A crash of the runner costs only that model:
// Done is closed, Err says why, calls fail with a *RunnerExitError, and a
// stream in flight ends with an error event that carries the runner's
// stderr tail. A runner that stops making progress while it has work is
// killed after RunnerOptions.StallTimeout, which ends the same way with a
// *RunnerExitError that wraps ErrRunnerStalled. Its methods are safe for
// concurrent use.
type Runner struct {
	opts   RunnerOptions
	proc   *process
	client *http.Client
	info   Info
	live   *liveness
	health health

	unwatch   chan struct{} // closed by Close: the watchdog ends
	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error // Close's, set once
}

// runnerBase is the URL prefix of calls; the host is never resolved (the
// transport dials the socket).
const runnerBase = "http://modeld-runner"

// StartRunner starts a runner process for opts.ModelPath and waits until it
// serves, at most opts.LoadTimeout. A runner that fails to load or exits
// during load gives an error at once: the engine's error when the runner
// could report it (errors.Is(err, ErrInvalidModel) for a corrupt file),
// else a *RunnerExitError; both carry the tail of its stderr. ctx bounds
// the start only; the process lives until Close.
func StartRunner(ctx context.Context, opts RunnerOptions) (*Runner, error) {
	start := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := socketDir()
	if err != nil {
		return nil, err
	}
	cfg := wire.Config{
		ModelPath: opts.ModelPath, Socket: filepath.Join(dir, "runner.sock"), LibRoot: opts.LibRoot,
		CPUVariant: opts.CPUVariant, Options: opts.Options, ParentPID: os.Getpid(), LogLevel: opts.LogLevel,
	}
	argv := append(append([]string(nil), opts.Command...), cfg.Args()...)
	log := opts.Logger.With("model_path", opts.ModelPath) // the logger names the model id
	proc, err := startProcess(argv, opts.Env, log, crashReports{dir: opts.CrashDir, name: opts.Name}, func() error {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing its socket: %w", err)
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r := &Runner{opts: opts, proc: proc, client: unixClient(cfg.Socket), live: newLiveness(), unwatch: make(chan struct{})}
	if err := r.awaitReady(ctx); err != nil {
		return nil, err
	}
	if opts.StallTimeout > 0 {
		go r.watch()
	}
	info, err := r.fetchInfo()
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("llama: runner for %s: %w", opts.ModelPath, err)
	}
	r.info = info
	log.Info("llama: runner started", "pid", proc.pid, "socket", cfg.Socket, "stall_timeout", opts.StallTimeout, "step_timeout", opts.StepTimeout,
		"start_ms", time.Since(start).Milliseconds())
	return r, nil
}

// socketDir makes a private directory for the socket, short enough for a
// unix socket path (about 100 bytes at most).
func socketDir() (string, error) {
	dir, err := os.MkdirTemp("", "modeld-runner-")
	if err == nil && len(dir) > 80 {
		_ = os.RemoveAll(dir)
		dir, err = os.MkdirTemp("/tmp", "modeld-runner-")
	}
	if err != nil {
		return "", fmt.Errorf("llama: runner socket directory: %w", err)
	}
	return dir, nil
}

func unixClient(socket string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// awaitReady waits for the runner's status line; on any failure the
// process is gone when it returns.
func (r *Runner) awaitReady(ctx context.Context) error {
	p, path := r.proc, r.opts.ModelPath
	timer := time.NewTimer(r.opts.LoadTimeout)
	defer timer.Stop()
	select {
	case st := <-p.status:
		if st.Ready {
			return nil
		}
		// The runner exits right after reporting; wait for it so the
		// stderr tail is complete.
		r.stopQuietly()
		return fmt.Errorf("llama: runner could not load %s: %w%s", path, st.Error.ToError(), r.tailSuffix())
	case <-p.done:
		select {
		case st := <-p.status: // reported, then exited before we looked
			if st.Error != nil {
				return fmt.Errorf("llama: runner could not load %s: %w%s", path, st.Error.ToError(), r.tailSuffix())
			}
		default:
		}
		return fmt.Errorf("llama: runner for %s exited while loading: %w", path, p.exitErr)
	case <-timer.C:
		p.kill()
		return fmt.Errorf("llama: runner for %s not ready after %s (killed)%s", path, r.opts.LoadTimeout, r.tailSuffix())
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("llama: starting runner for %s: %w", path, ctx.Err())
	}
}

// stopQuietly stops a runner that is about to exit, or is stuck.
func (r *Runner) stopQuietly() {
	t := time.NewTimer(r.opts.StopGrace)
	defer t.Stop()
	select {
	case <-r.proc.done:
	case <-t.C:
		r.proc.kill()
	}
}

func (r *Runner) tailSuffix() string { return tailSuffix(r.proc.tail.String()) }

// tailSuffix is an error's end that quotes a runner's stderr tail.
func tailSuffix(tail string) string {
	if tail != "" {
		return "; runner stderr ended with:\n" + tail
	}
	return ""
}

// Info describes the model (read once at start).
func (r *Runner) Info() Info { return r.info }

// PID is the runner's process id.
func (r *Runner) PID() int { return r.proc.pid }

// Done is closed when the runner process has exited, for any reason.
func (r *Runner) Done() <-chan struct{} { return r.proc.done }

// Err is nil while the runner runs; after it exited, ErrClosed when Close
// stopped it, else a *RunnerExitError (exit status and stderr's tail).
func (r *Runner) Err() error {
	if !r.proc.exited() {
		return nil
	}
	return r.proc.exitErr
}

// RSS is the runner process's resident memory in bytes.
func (r *Runner) RSS() (uint64, error) {
	if r.proc.exited() {
		return 0, r.proc.exitErr
	}
	p, err := psprocess.NewProcess(int32(r.proc.pid))
	if err != nil {
		return 0, fmt.Errorf("llama: runner %d: %w", r.proc.pid, err)
	}
	mi, err := p.MemoryInfo()
	if err != nil {
		return 0, fmt.Errorf("llama: runner %d memory: %w", r.proc.pid, err)
	}
	return mi.RSS, nil
}

// Close stops the runner: its stdin is closed and it gets SIGTERM (it
// closes the model, so streams in flight end with ErrClosed), then SIGKILL
// after RunnerOptions.StopGrace. It returns once the process is reaped and
// its memory freed. Its error says what did not go cleanly: the runner had
// to be killed, it exited with another status than 0, a signal could not
// be sent, or its socket could not be removed (nil for a runner that had
// already ended on its own: Err says how). Safe to call more than once; each
// call returns the first's error.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		r.closing.Store(true)
		close(r.unwatch)
		r.closeErr = r.proc.stop(r.opts.StopGrace)
		r.client.CloseIdleConnections()
	})
	return r.closeErr
}

// alive is nil while calls may be made.
func (r *Runner) alive() error {
	if r.closing.Load() {
		return ErrClosed
	}
	if r.proc.exited() {
		return r.proc.exitErr
	}
	return r.health.current()
}

// brokenCall explains a call that failed in transport: the caller's
// context, the runner's death (waited for a little, so the error carries
// the exit status and stderr), or the transport error.
func (r *Runner) brokenCall(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.closing.Load() {
		return ErrClosed
	}
	t := time.NewTimer(deathWait)
	defer t.Stop()
	select {
	case <-r.proc.done:
		return r.proc.exitErr
	case <-t.C:
		return fmt.Errorf("llama: runner %d unreachable: %w%s", r.proc.pid, err, r.tailSuffix())
	}
}

// call makes a non-streaming call, bounded by ctx and CallTimeout, and
// returns the reply body. It is work in flight for the stall watchdog.
func (r *Runner) call(ctx context.Context, method, route string, q url.Values, body []byte) ([]byte, error) {
	if err := r.alive(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.live.begin()
	defer r.live.end()
	ctx, cancel := context.WithTimeoutCause(ctx, r.opts.CallTimeout,
		fmt.Errorf("llama: runner %d did not answer %s within %s: %w", r.proc.pid, route, r.opts.CallTimeout, context.DeadlineExceeded))
	defer cancel()
	b, err := r.roundTrip(ctx, method, route, q, body)
	var tr *transportError
	if errors.As(err, &tr) {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, r.brokenCall(ctx, tr.err)
	}
	return b, err
}

// transportError is a call that got no complete answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// maxCallAnswer bounds the answer to a non-streaming call, as
// wire.MaxCallBody bounds the request: the largest answers (a tokenized
// prompt with its pieces, a rendered chat prompt) hold what a request of
// that size asks about, a few bytes of JSON per token.
const maxCallAnswer = wire.MaxCallBody

// roundTrip sends one request and returns the body of a 200 answer; a
// failed answer is its decoded error, a broken exchange a *transportError.
func (r *Runner) roundTrip(ctx context.Context, method, route string, q url.Values, body []byte) ([]byte, error) {
	u := runnerBase + route
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("llama: runner call %s: %w", route, err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, &transportError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCallAnswer+1))
	if err != nil {
		return nil, &transportError{err}
	}
	if len(b) > maxCallAnswer {
		// A runner that sends this is broken or hostile: it goes, not
		// the daemon's memory.
		r.proc.killFor(fmt.Sprintf("it answered %s with over %d MiB (the most a legitimate answer can be); killed", route, maxCallAnswer>>20))
		return nil, &transportError{fmt.Errorf("llama: runner answer to %s over %d bytes", route, maxCallAnswer)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, replyError(resp.StatusCode, b)
	}
	return b, nil
}

// replyError decodes a failed call's wire.Error.
func replyError(status int, body []byte) error {
	var we wire.Error
	if err := json.Unmarshal(body, &we); err != nil || we.Message == "" {
		return fmt.Errorf("llama: runner answered %d: %s", status, bytes.TrimSpace(body))
	}
	return we.ToError()
}

func (r *Runner) callJSON(ctx context.Context, method, route string, q url.Values, body []byte, out any) error {
	b, err := r.call(ctx, method, route, q, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("llama: runner reply to %s: %w", route, err)
	}
	return nil
}

func (r *Runner) fetchInfo() (Info, error) {
	var info Info
	err := r.callJSON(context.Background(), http.MethodGet, wire.RouteInfo, nil, nil, &info)
	return info, err
}

// StatsContext asks the runner for its scheduler's state.
func (r *Runner) StatsContext(ctx context.Context) (Stats, error) {
	var st Stats
	err := r.callJSON(ctx, http.MethodGet, wire.RouteStats, nil, nil, &st)
	return st, err
}

// Stats is the runner's scheduler state; when the runner cannot answer,
// only Slots is set (use StatsContext for the error).
func (r *Runner) Stats() Stats {
	st, err := r.StatsContext(context.Background())
	if err != nil {
		r.opts.Logger.Debug("llama: runner stats", "model_path", r.opts.ModelPath, "err", err)
		return Stats{Slots: r.info.Slots}
	}
	return st
}
