package llama

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

// recordLog keeps the records a logger gets, with their attributes.
type recordLog struct {
	mu   sync.Mutex
	recs []map[string]string // "msg" and each attribute, as text
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordLog) WithGroup(string) slog.Handler            { return l }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		rec[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

// find returns the records whose message is msg.
func (l *recordLog) find(msg string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.recs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// all is every record's text, for failure messages and for checking that
// no dump reached the log.
func (l *recordLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintln(&b, r)
	}
	return b.String()
}

// crashingRunner starts a test runner that reports crashes into its own
// directory, on a recording logger.
func crashingRunner(t *testing.T, env ...string) (*Runner, string, *recordLog) {
	t.Helper()
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	opts := runnerOpts(t, path, Options{Slots: 1, ContextSize: 256}, env...)
	opts.CrashDir = filepath.Join(t.TempDir(), "crash")
	opts.Name = "t/crashy:latest"
	logs := &recordLog{}
	opts.Logger = slog.New(logs)
	r, err := StartRunner(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, opts.CrashDir, logs
}

// checkCrashReport checks that a crashed runner's error gives its cause and
// no goroutine dump, to the stream and in Err, and that the dump is in one
// private file of dir named by the daemon's log line.
func checkCrashReport(t *testing.T, r *Runner, streamErr error, dir string, logs *recordLog, cause string) {
	t.Helper()
	<-r.Done()
	for what, err := range map[string]error{"stream": streamErr, "Err": r.Err()} {
		if !errors.Is(err, ErrRunnerExited) {
			t.Fatalf("%s error %v, want ErrRunnerExited", what, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, cause) || strings.Contains(msg, "goroutine ") {
			t.Errorf("%s error %q: want the cause %q and no goroutine dump", what, msg, cause)
		}
	}
	var ee *RunnerExitError
	if !errors.As(r.Err(), &ee) || !strings.Contains(ee.Cause, cause) || strings.Contains(ee.Stderr, "goroutine ") {
		t.Errorf("exit error %#v: want Cause %q and a tail without the dump", r.Err(), cause)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "runner-t_crashy_latest-*.log"))
	if len(files) != 1 {
		t.Fatalf("crash reports %v in %s, want one", files, dir)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("crash report %s: %v, mode %v, want 0600", files[0], err, fi.Mode())
	}
	dump, _ := os.ReadFile(files[0])
	if !strings.Contains(string(dump), "goroutine ") || !strings.Contains(string(dump), cause) {
		t.Errorf("crash report holds no dump with the cause:\n%s", dump)
	}
	recs := logs.find("llama: runner crashed")
	if len(recs) != 1 || recs[0]["crash_report"] != files[0] || !strings.Contains(recs[0]["cause"], cause) {
		t.Errorf("log records %v, want one naming %s with the cause", recs, files[0])
	}
	if all := logs.all(); strings.Contains(all, "goroutine ") {
		t.Errorf("the goroutine dump reached the daemon's log:\n%s", all)
	}
}

// TestRunnerPanicReported: a runner whose decode loop panics (a bug in the
// runner) ends its stream with the panic's message, not the Go runtime's
// goroutine dump, which goes to a crash file that the log names.
func TestRunnerPanicReported(t *testing.T) {
	r, dir, logs := crashingRunner(t, envPanicAt+"=3")
	prompt, _ := r.Tokenize("Hello world", true, false)
	// The panic can come before the runner has answered the call itself (a
	// busy machine delays the answer past the third token): then the call's
	// error carries the cause, else the stream's final event does.
	ch, err := r.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 50})
	if err == nil {
		evs := collect(t, ch)
		final := evs[len(evs)-1]
		if final.Finish != FinishError {
			t.Fatalf("final event %+v, want an error", final)
		}
		err = final.Err
	}
	checkCrashReport(t, r, err, dir, logs, "panic: "+testPanic)
	if ee := new(RunnerExitError); errors.As(r.Err(), &ee) && ee.Status != "exit status 2" {
		t.Errorf("status %q, want the Go runtime's exit status 2", ee.Status)
	}
}

// TestRunnerSignalReported: a runner killed by a fatal signal mid-stream
// reports the signal; the Go runtime's dump of a SIGSEGV or SIGABRT goes to
// the crash file; a SIGKILL leaves no dump and says "killed by SIGKILL".
func TestRunnerSignalReported(t *testing.T) {
	for _, c := range []struct {
		sig   syscall.Signal
		cause string
	}{
		{syscall.SIGSEGV, "SIGSEGV: segmentation violation"},
		{syscall.SIGABRT, "SIGABRT: abort"},
		{syscall.SIGKILL, "killed by SIGKILL"},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			r, dir, logs := crashingRunner(t, envPauseAt+"=3")
			prompt, _ := r.Tokenize("Hello world", true, false)
			ch := mustGenerate(t, r, Request{Prompt: prompt, MaxTokens: 50})
			takeTokens(t, ch, 3)
			if err := syscall.Kill(r.PID(), c.sig); err != nil {
				t.Fatal(err)
			}
			evs := collect(t, ch)
			final := evs[len(evs)-1]
			if c.sig != syscall.SIGKILL {
				checkCrashReport(t, r, final.Err, dir, logs, c.cause)
				return
			}
			if msg := final.Err.Error(); !strings.Contains(msg, c.cause) || !strings.Contains(msg, "last output: ") {
				t.Errorf("stream error %q, want %q and the runner's last line", msg, c.cause)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
				t.Errorf("crash files %v for a SIGKILL, which leaves no dump", files)
			}
		})
	}
}

// TestRunnerOutOfMemoryAtLoad: a runner that runs out of memory while it
// loads says so first.
func TestRunnerOutOfMemoryAtLoad(t *testing.T) {
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	opts := runnerOpts(t, path, Options{Slots: 1, ContextSize: 128}, envCrash+"=fatal error: runtime: out of memory")
	opts.CrashDir = t.TempDir()
	_, err := StartRunner(context.Background(), opts)
	var ee *RunnerExitError
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.Cause, "out of memory at load: fatal error: runtime: out of memory") {
		t.Fatalf("err = %v, want the cause out of memory at load", err)
	}
}

// TestCrashCapture: the header lines of each kind of Go runtime crash are
// its cause, the dump is kept apart, and the lines before it are not part of
// it.
func TestCrashCapture(t *testing.T) {
	for name, c := range map[string]struct {
		lines []string
		cause string
	}{
		"panic": {[]string{"INFO ready", "panic: boom", "", "goroutine 1 [running]:", "main.main()", "\t/x.go:5 +0x1d"}, "panic: boom"},
		"nil": {[]string{"panic: runtime error: invalid memory address or nil pointer dereference",
			"[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4]", "", "goroutine 7 [running]:"},
			"panic: runtime error: invalid memory address or nil pointer dereference; [signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4]"},
		"fatal": {[]string{"fatal error: runtime: out of memory", "", "runtime stack:", "runtime.throw()"}, "fatal error: runtime: out of memory"},
		"native": {[]string{"ggml.c:12: GGML_ASSERT(n > 0) failed", "SIGABRT: abort", "PC=0x7f m=3 sigcode=18446744073709551610", "signal arrived during cgo execution", "", "goroutine 9 [syscall]:"},
			"SIGABRT: abort; after: ggml.c:12: GGML_ASSERT(n > 0) failed"},
		"overflow": {[]string{"runtime: goroutine stack exceeds 1000000000-byte limit", "runtime: sp=0xc0 stack=[0xc0, 0xc1]", "fatal error: stack overflow", "", "goroutine 1 [running]:"},
			"runtime: goroutine stack exceeds 1000000000-byte limit; runtime: sp=0xc0 stack=[0xc0, 0xc1]; fatal error: stack overflow"},
	} {
		var cc crashCapture
		for _, l := range c.lines {
			cc.line(l)
		}
		cause, dump, _, ok := cc.crashed()
		if got := strings.Join(cause, "; "); !ok || got != c.cause {
			t.Errorf("%s: cause %q (crashed %v), want %q", name, got, ok, c.cause)
		}
		if strings.Contains(string(dump), "INFO ready") || strings.Contains(string(dump), "GGML_ASSERT") {
			t.Errorf("%s: the lines before the crash are in its dump:\n%s", name, dump)
		}
	}
	var cc crashCapture
	cc.line("INFO a log line")
	if _, _, _, ok := cc.crashed(); ok {
		t.Error("a log line taken for a crash")
	}
}

// TestCrashReportsBounded: a directory keeps the newest maxCrashReports
// reports, each private, and a name that is no file name is made safe.
func TestCrashReportsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "crash")
	cr := crashReports{dir: dir, name: "../../evil/name:latest"}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var last string
	for i := range maxCrashReports + 5 {
		p, err := cr.write(100+i, "exit status 2", "panic: x", "", []byte("goroutine 1 [running]:\n"), false, start.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mod := start.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
		last = p
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != maxCrashReports {
		t.Fatalf("%d reports kept, want %d", len(files), maxCrashReports)
	}
	if filepath.Dir(last) != dir || !strings.HasPrefix(filepath.Base(last), "runner-evil_name_latest-") {
		t.Errorf("report path %s", last)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("runner-evil_name_latest-%s-%d.log", start.Format("20060102T150405.000Z"), 100))); !os.IsNotExist(err) {
		t.Errorf("the oldest report was kept: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("crash directory mode %v, %v", fi.Mode(), err)
	}
}
