package llama

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Crash reports of a runner.
//
// A runner that dies tells the client and the daemon's log its cause, in a
// line: the signal that killed it ("killed by SIGSEGV"), the Go runtime's
// reason ("panic: ...", "fatal error: runtime: out of memory"), the last
// line llama.cpp wrote, or "out of memory at load". The Go runtime's
// goroutine dump that follows a panic or a fatal signal is for developers,
// not clients: it never enters the stderr tail that errors carry, and goes
// instead to a private file in RunnerOptions.CrashDir, which the daemon's
// log line names.

const (
	// maxCrashDump bounds what is kept of one dump.
	maxCrashDump = 1 << 20
	// maxCrashReports is how many crash files a directory keeps (the
	// oldest are removed).
	maxCrashReports = 20
	// maxCauseLines bounds the header lines of a crash kept as its cause.
	maxCauseLines = 3
	// maxCauseLine bounds one of them.
	maxCauseLine = 300
)

// crashStart matches the first line the Go runtime writes when the process
// dies: a panic, a fatal error, a fatal signal, or a dump on SIGQUIT.
var crashStart = regexp.MustCompile(`^(panic: |fatal error: |fatal: |unexpected fault address |runtime: |SIG[A-Z]+: |goroutine \d+ \[)`)

// crashCapture splits a runner's stderr at the start of a Go runtime crash:
// the lines before it are the runner's log, the crash's header lines are
// its cause, and the rest (the goroutine dump) is kept apart, bounded.
type crashCapture struct {
	mu      sync.Mutex
	last    string // the last line before the crash
	started bool
	header  bool     // still reading the crash's header lines
	cause   []string // the header lines
	dump    bytes.Buffer
	cut     bool // the dump was cut at maxCrashDump
}

// line takes a non-record stderr line; it reports whether the line belongs
// to a crash dump (the caller keeps it out of the tail and the log), and
// whether it is one of the crash's header lines (which the tail keeps).
func (c *crashCapture) line(l string) (inDump, header bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		if !crashStart.MatchString(l) {
			c.last = l
			return false, false
		}
		c.started, c.header = true, !strings.HasPrefix(l, "goroutine ")
	}
	if c.dump.Len()+len(l)+1 <= maxCrashDump {
		c.dump.WriteString(l)
		c.dump.WriteByte('\n')
	} else {
		c.cut = true
	}
	if c.header {
		t := strings.TrimSpace(l)
		switch {
		case t == "", strings.HasPrefix(t, "goroutine "), t == "runtime stack:", len(c.cause) == maxCauseLines:
			c.header = false
		case strings.HasPrefix(t, "PC=") || strings.HasPrefix(t, "signal arrived during"):
			// registers, not a cause
		default:
			if len(t) > maxCauseLine {
				t = t[:maxCauseLine] + "…"
			}
			c.cause = append(c.cause, t)
			return true, true
		}
	}
	return true, false
}

// record notes a log record's text as the last line before a crash.
func (c *crashCapture) record(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.last = text
	}
}

// crashed returns the crash's cause lines and its dump; ok is false when
// the runner wrote no crash. A crash on a signal (SIGABRT after a failed
// assertion in native code, SIGSEGV) adds the line written before it.
func (c *crashCapture) crashed() (cause []string, dump []byte, cut, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cause = slices.Clone(c.cause)
	if len(cause) > 0 && strings.HasPrefix(cause[0], "SIG") && c.last != "" {
		last := c.last
		if len(last) > maxCauseLine {
			last = last[:maxCauseLine] + "…"
		}
		cause = append(cause, "after: "+last)
	}
	return cause, bytes.Clone(c.dump.Bytes()), c.cut, c.started
}

// exitStatus says how a process ended, in words: "exit status 2", "killed
// by SIGKILL", "killed by SIGSEGV (core dumped)".
func exitStatus(st *os.ProcessState, werr error) string {
	if st == nil {
		if werr != nil {
			return werr.Error()
		}
		return "unknown status"
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return st.String()
	}
	name := unix.SignalName(ws.Signal())
	if name == "" {
		name = ws.Signal().String()
	}
	s := "killed by " + name
	if ws.CoreDump() {
		s += " (core dumped)"
	}
	return s
}

// oomLine matches what the Go runtime, the C library or llama.cpp write
// when memory runs out.
var oomLine = regexp.MustCompile(`(?i)out of memory|cannot allocate memory|failed to allocate|std::bad_alloc|unable to allocate`)

// crashCause is the one-line cause of a runner's death for its exit error:
// the crash's header, else the last line of its output; "out of memory at
// load" leads when memory ran out before the runner was ready.
func crashCause(header []string, tail string, status string, ready bool) string {
	var cause string
	if len(header) > 0 {
		cause = strings.Join(header, "; ")
	} else if last := lastLine(tail); last != "" && !strings.HasPrefix(status, "exit status 0") {
		cause = "last output: " + last
	}
	if !ready && (oomLine.MatchString(cause) || oomLine.MatchString(tail) || status == "killed by SIGKILL") {
		why := "out of memory at load"
		if !oomLine.MatchString(cause) && !oomLine.MatchString(tail) {
			why = "killed while loading (the kernel's out-of-memory killer sends SIGKILL when memory runs out)"
		}
		if cause == "" {
			return why
		}
		return why + ": " + cause
	}
	return cause
}

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > maxCauseLine {
		s = s[:maxCauseLine] + "…"
	}
	return strings.TrimSpace(s)
}

// crashReports writes crash dumps into dir: runner-<name>-<time>.log, mode
// 0600, the newest maxCrashReports kept.
type crashReports struct {
	dir  string
	name string
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9-]+`)

// write saves one crash's dump with a header naming the model, the process
// and how it ended, and the log lines before it; it returns the file's path.
func (c crashReports) write(pid int, status, cause, tail string, dump []byte, cut bool, now time.Time) (string, error) {
	if c.dir == "" {
		return "", errors.New("no crash directory configured")
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", fmt.Errorf("llama: crash directory: %w", err)
	}
	name := strings.Trim(unsafeName.ReplaceAllString(c.name, "_"), "_")
	if len(name) > 80 {
		name = name[:80]
	}
	path := filepath.Join(c.dir, fmt.Sprintf("runner-%s-%s-%d.log", name, now.UTC().Format("20060102T150405.000Z"), pid))
	var b bytes.Buffer
	fmt.Fprintf(&b, "modeld runner crash\nmodel: %s\nprocess: %d\ntime: %s\nstatus: %s\ncause: %s\n", c.name, pid, now.UTC().Format(time.RFC3339Nano), status, cause)
	if tail != "" {
		fmt.Fprintf(&b, "\n--- the runner's last output before the crash ---\n%s\n", tail)
	}
	b.WriteString("\n--- the Go runtime's report ---\n")
	b.Write(dump)
	if cut {
		fmt.Fprintf(&b, "\n[cut at %d bytes]\n", maxCrashDump)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("llama: crash report: %w", err)
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("llama: crash report: %w", err)
	}
	c.prune()
	return path, nil
}

// prune removes the oldest crash files beyond maxCrashReports (the names
// sort by time within one model; modification times order them across).
func (c crashReports) prune() {
	paths, err := filepath.Glob(filepath.Join(c.dir, "runner-*.log"))
	if err != nil || len(paths) <= maxCrashReports {
		return
	}
	type file struct {
		path string
		mod  time.Time
	}
	files := make([]file, 0, len(paths))
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			files = append(files, file{p, fi.ModTime()})
		}
	}
	slices.SortFunc(files, func(a, b file) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	for _, f := range files[:max(0, len(files)-maxCrashReports)] {
		_ = os.Remove(f.path)
	}
}

// report describes a runner's abnormal end on the daemon's log, writing
// its dump to a crash file when it left one. It returns the cause.
func (p *process) report(log *slog.Logger, status string, ready bool) string {
	header, dump, cut, crashed := p.crash.crashed()
	tail := p.tail.String()
	cause := crashCause(header, tail, status, ready)
	if !crashed {
		return cause
	}
	attrs := []any{"pid", p.pid, "status", status, "cause", cause}
	path, err := p.reports.write(p.pid, status, cause, tail, dump, cut, time.Now())
	if err != nil {
		attrs = append(attrs, "crash_report_error", err)
	} else {
		attrs = append(attrs, "crash_report", path)
	}
	log.Error("llama: runner crashed", attrs...)
	return cause
}
