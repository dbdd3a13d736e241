package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// longChatHome is a home with t/long: the tiny chat model with a 16k
// context, so a stream asked for 15000 tokens stays live for seconds.
func longChatHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	o := ggufgen.Tiny(ggufgen.SPM)
	o.Context = 16384
	path := filepath.Join(t.TempDir(), "long.gguf")
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", path, "--name", "t/long"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	return home
}

// sseStream is a chat stream read event by event.
type sseStream struct {
	res  *http.Response
	sc   *bufio.Scanner
	data []string // the data of each event so far
}

// openStream starts a greedy streaming chat completion of model for
// maxTokens tokens and returns once the first event came. (The tiny model
// gives no end-of-generation token for thousands of tokens, at about 600
// per second per stream with four.)
func openStream(t *testing.T, base, model string, maxTokens int) *sseStream {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"temperature":0,
		"messages":[{"role":"user","content":"Tell me a long story."}]}`, model, maxTokens)
	res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 {
		b, _ := bufio.NewReader(res.Body).ReadString(0)
		t.Fatalf("stream: %d %s", res.StatusCode, b)
	}
	s := &sseStream{res: res, sc: bufio.NewScanner(res.Body)}
	s.sc.Buffer(nil, 1<<20)
	if !s.next() {
		t.Fatalf("stream ended before its first event: %v", s.sc.Err())
	}
	return s
}

// next reads the next event; false at the end of the body.
func (s *sseStream) next() bool {
	for s.sc.Scan() {
		if d, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			s.data = append(s.data, d)
			return true
		}
	}
	return false
}

// rest reads the stream to its end and returns its last event and whether
// [DONE] came.
func (s *sseStream) rest() (last string, done bool) {
	for s.next() {
	}
	for _, d := range s.data {
		done = done || d == "[DONE]"
	}
	return s.data[len(s.data)-1], done
}

// TestDaemonStallRecovers: the chat runner, stopped (SIGSTOP) mid-stream,
// is found stalled within the stall timeout and killed; the stream ends with
// an error event that says so, and the next request loads a new runner and
// is answered.
func TestDaemonStallRecovers(t *testing.T) {
	daemon, base, logs := startDaemon(t, longChatHome(t), "--stall-timeout", "1s", "--context-size", "16384")
	s := openStream(t, base, "t/long", 15000)
	runner := childPID(t, daemon.Process.Pid, "runner")
	if err := syscall.Kill(runner, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(runner, syscall.SIGKILL) })
	last, done := s.rest()
	took := time.Since(stopped)
	t.Logf("stream ended %s after SIGSTOP (stall timeout 1s)", took.Round(time.Millisecond))
	if done || !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, "runner stalled: no progress for 1s, killed") {
		t.Fatalf("last event %s (done %v), want an error event naming the stall\n%s", last, done, logs)
	}
	waitGone(t, runner)

	again := openStream(t, base, "t/long", 8)
	if last, done := again.rest(); !done || strings.Contains(last, "error") {
		t.Fatalf("after the stall: last event %s, done %v", last, done)
	}
	if fresh := childPID(t, daemon.Process.Pid, "runner"); fresh == runner {
		t.Fatalf("runner %d answered again; want a new one", fresh)
	}
}

// waitGone waits until pid is no live process.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	poll(t, fmt.Sprintf("process %d to end", pid), func() bool { return !pidAlive(pid) })
}

// pidAlive reports whether pid is a process that is not a zombie.
func pidAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// runnersOf lists the live runner processes whose command line holds home's
// test model directory (the runner's --model is a blob under home).
func runnersOf(home string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Contains(cmdline, []byte("runner")) && bytes.Contains(cmdline, []byte(home)) && pidAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestDaemonShutdownLiveStreams: SIGTERM with four live streams and a
// non-streaming request in flight: each stream ends with an error event (no
// silent cut, no [DONE]) after the grace, the other request gets a 503, the
// daemon exits soon after the grace (a generous ceiling: the machine may be
// busy), and no runner is left. Every request is greedy: a sampled one could
// end on the tiny vocabulary's end token before the signal.
func TestDaemonShutdownLiveStreams(t *testing.T) {
	home := longChatHome(t)
	// Under -race each process sleeps 1s at exit (the race runtime's
	// atexit_sleep_ms): not modeld's time, so not measured.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	daemon, base, logs := startDaemon(t, home, "--chat-slots", "5", "--context-size", "16384")
	type answer struct {
		status int
		body   string
		err    error
	}
	plain := make(chan answer, 1)
	go func() {
		res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
			`{"model":"t/long","max_tokens":15000,"temperature":0,"messages":[{"role":"user","content":"Tell me a long story."}]}`))
		if err != nil {
			plain <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		plain <- answer{res.StatusCode, string(b), err}
	}()
	var streams []*sseStream
	for range 4 {
		streams = append(streams, openStream(t, base, "t/long", 15000))
	}
	// All five hold a slot of the model, and every stream is live: past its
	// first event (the role), it has streamed a token.
	waitMetric(t, base, `modeld_model_requests_total{model="t/long"} 5`)
	for i, s := range streams {
		for len(s.data) < 2 {
			if !s.next() {
				t.Fatalf("stream %d ended before the signal: %v", i, s.data)
			}
		}
	}
	if n := len(runnersOf(home)); n != 1 {
		t.Fatalf("%d runners of the test home, want 1", n)
	}
	exited := make(chan error, 1)
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	go func() { exited <- daemon.Wait() }()
	for i, s := range streams {
		last, done := s.rest()
		t.Logf("stream %d: %d events before the cut", i, len(s.data))
		if done || !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, `"code":"shutting_down"`) {
			t.Errorf("stream %d: last event %s (done %v), want the shutting_down error event", i, last, done)
		}
		if len(s.data) < 3 {
			t.Errorf("stream %d: %d events; it was not live", i, len(s.data))
		}
	}
	if a := <-plain; a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"code":"shutting_down"`) {
		t.Errorf("non-streaming request in flight: %d %s %v, want a 503 shutting_down", a.status, a.body, a.err)
	}
	select {
	case err := <-exited:
		took := time.Since(sent)
		t.Logf("daemon exited %s after SIGTERM with 4 live streams (grace 2s)", took.Round(time.Millisecond))
		if err != nil {
			t.Errorf("daemon exited with %v\n%s", err, logs)
		}
	case <-time.After(hangCeiling):
		t.Fatalf("daemon still running %s after SIGTERM\n%s", hangCeiling, logs)
	}
	if left := runnersOf(home); len(left) > 0 {
		t.Fatalf("runners %v left after the daemon exited", left)
	}
}

// waitMetric polls /metrics until it has the line want.
func waitMetric(t *testing.T, base, want string) {
	t.Helper()
	poll(t, fmt.Sprintf("%q in /metrics", want), func() bool {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(strings.Split(string(b), "\n"), want)
	})
}

// serveOnce runs `modeld serve` on home expecting it to fail at start, and
// returns its exit error and output.
func serveOnce(t *testing.T, home string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LIB_DIR="+testenv.LibDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), hangCeiling)
	defer cancel()
	go func() { <-ctx.Done(); _ = cmd.Process.Kill() }()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHomeLock: a second daemon on a home that one serves refuses to start
// and names the first one's process; store commands still work beside it;
// once the first one exits, a new one starts.
func TestHomeLock(t *testing.T) {
	home := chatHome(t)
	first, _, logs := startDaemon(t, home)
	out, err := serveOnce(t, home)
	var ee *exec.ExitError
	want := fmt.Sprintf("another modeld (process %d) is already serving the home %s", first.Process.Pid, home)
	if !errors.As(err, &ee) || !strings.Contains(out, want) {
		t.Fatalf("second daemon: %v\n%s\nwant a refusal saying %q", err, out, want)
	}
	t.Logf("second daemon refused: %s", strings.TrimSpace(out))
	if ls, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "ls"); err != nil || !strings.Contains(ls, "t/chat") {
		t.Fatalf("ls beside the daemon: %v\n%s", err, ls)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first daemon: %v\n%s", err, logs)
	}
	if pid := lockHolder(filepath.Join(home, homeLockFile)); pid != 0 {
		t.Errorf("lock file still names process %d after a clean exit", pid)
	}
	startDaemon(t, home) // fails the test unless it listens
}

// TestLockHome: the lock in one process (two opens conflict like two
// processes), its holder's id, and its release.
func TestLockHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "fresh") // created by lockHome
	l, err := lockHome(home)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockHome(home)
	var le *HomeLockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || le.Home != home {
		t.Fatalf("second lock: %v, want a HomeLockedError naming process %d", err, os.Getpid())
	}
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	l, err = lockHome(home)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	if msg := (&HomeLockedError{Home: "/h", Lock: "/h/daemon.lock"}).Error(); !strings.HasPrefix(msg, "another modeld is already serving the home /h") {
		t.Errorf("message without a pid: %q", msg)
	}
}
