package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncLog is a daemon's log, written by one goroutine and read by the test.
type syncLog struct{ *growing }

func (l *syncLog) add(line string) { l.write(line + "\n") }

// startDaemonLogged is startDaemon keeping the whole log, not only its
// start.
func startDaemonLogged(t *testing.T, home string, args ...string) (*exec.Cmd, string, *syncLog) {
	t.Helper()
	logs := &syncLog{newGrowing()}
	cmd, base := startDaemonLines(t, home, func(line string, _ bool) { logs.add(line) }, args...)
	return cmd, base, logs
}

// timedStream reads a stream's events in the background, noting when each
// came.
type timedStream struct {
	s    *sseStream
	mu   sync.Mutex
	at   []time.Time
	done chan struct{}
}

func readTimed(s *sseStream) *timedStream {
	ts := &timedStream{s: s, at: []time.Time{time.Now()}, done: make(chan struct{})}
	go func() {
		defer close(ts.done)
		for s.next() {
			ts.mu.Lock()
			ts.at = append(ts.at, time.Now())
			ts.mu.Unlock()
		}
	}()
	return ts
}

// loadedState is the state of model in /v1/system's "loaded" section.
func loadedState(t *testing.T, base, model string) (state, problem string) {
	t.Helper()
	res, err := http.Get(base + "/v1/system")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sys struct {
		Loaded struct {
			Models []struct{ ID, State, Problem string }
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&sys); err != nil {
		t.Fatal(err)
	}
	for _, m := range sys.Loaded.Models {
		if m.ID == model && m.State != "unloading" {
			return m.State, m.Problem
		}
	}
	return "", ""
}

// TestDaemonWedgedRunnerDefaults: with the default stall timeout, a chat
// runner stopped mid-stream (SIGSTOP) is killed and its stream gets the
// stall's error well within 30 s of its last event; meanwhile /v1/system
// shows the model unresponsive and every dialect's requests to the model
// are refused at once with a 503 and Retry-After (before the kill, not
// after waiting on the dead process); the next request gets a new runner.
func TestDaemonWedgedRunnerDefaults(t *testing.T) {
	daemon, base, logs := startDaemonLogged(t, longChatHome(t), "--context-size", "16384", "--chat-slots", "2")
	ts := readTimed(openStream(t, base, "t/long", 15000))
	runner := childPID(t, daemon.Process.Pid, "runner")
	t.Cleanup(func() { _ = syscall.Kill(runner, syscall.SIGKILL) })
	if err := syscall.Kill(runner, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	poll(t, "t/long to show as unresponsive in /v1/system", func() bool {
		st, _ := loadedState(t, base, "t/long")
		return st == "unresponsive"
	})
	_, problem := loadedState(t, base, "t/long")
	t.Logf("/v1/system shows t/long unresponsive %s after SIGSTOP: %s", time.Since(stopped).Round(time.Millisecond), problem)

	for _, c := range []struct{ path, body, shape string }{
		{"/v1/chat/completions", `{"model":"t/long","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, `"code":"model_unresponsive"`},
		{"/v1/messages", `{"model":"t/long","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, `"type":"error"`},
		{"/api/chat", `{"model":"t/long","stream":false,"messages":[{"role":"user","content":"hi"}]}`, `"error":"`},
		{"/v1/completions", `{"model":"t/long","max_tokens":4,"prompt":"hi"}`, `"code":"model_unresponsive"`},
	} {
		res, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		select {
		case <-ts.done:
			t.Fatalf("%s was answered only after the stream ended (the runner was killed): %d %s", c.path, res.StatusCode, b)
		default:
		}
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(b), c.shape) || !strings.Contains(string(b), "has not responded") {
			t.Errorf("%s while the runner is stopped: %d Retry-After %q %s; want a 503 in the dialect's shape saying so",
				c.path, res.StatusCode, res.Header.Get("Retry-After"), b)
		}
	}

	<-ts.done
	ended := time.Now()
	ts.mu.Lock()
	lastLife := ts.at[len(ts.at)-2] // the last event before the error event
	ts.mu.Unlock()
	last := ts.s.data[len(ts.s.data)-1]
	took := ended.Sub(lastLife)
	t.Logf("the stream's error came %s after its last event (%s after SIGSTOP), default stall timeout", took.Round(time.Millisecond), ended.Sub(stopped).Round(time.Millisecond))
	if !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, "runner stalled: no progress for 20s, killed") {
		t.Fatalf("last event %s, want the stall's error\n%s", last, logs)
	}
	waitGone(t, runner)
	again := openStream(t, base, "t/long", 8)
	if last, done := again.rest(); !done || strings.Contains(last, "error") {
		t.Fatalf("after the stall: last event %s, done %v", last, done)
	}
	if st, _ := loadedState(t, base, "t/long"); st != "ready" {
		t.Errorf("state after the new runner answered: %q", st)
	}
}

// TestDaemonRunnerCrashReport: a chat runner that dies of a fatal signal
// mid-stream gives the client the signal, not the Go runtime's goroutine
// dump; the dump goes to a private file under the home's crash/, which the
// daemon's log line names.
func TestDaemonRunnerCrashReport(t *testing.T) {
	home := longChatHome(t)
	daemon, base, logs := startDaemonLogged(t, home, "--context-size", "16384")
	s := openStream(t, base, "t/long", 15000)
	runner := childPID(t, daemon.Process.Pid, "runner")
	if err := syscall.Kill(runner, syscall.SIGSEGV); err != nil {
		t.Fatal(err)
	}
	last, done := s.rest()
	if done || !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, "SIGSEGV: segmentation violation") ||
		strings.Contains(last, "goroutine ") {
		t.Fatalf("last event %s (done %v), want the signal as the cause and no goroutine dump", last, done)
	}
	t.Logf("the client saw: %s", last)
	files, _ := filepath.Glob(filepath.Join(home, "crash", "runner-t_long*.log"))
	if len(files) != 1 {
		t.Fatalf("crash reports %v, want one\n%s", files, logs)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("crash report %s: %v, mode %v", files[0], err, fi.Mode())
	}
	dump, _ := os.ReadFile(files[0])
	if !strings.Contains(string(dump), "goroutine ") {
		t.Errorf("crash report without the dump:\n%s", dump)
	}
	logs.await(t, "a log line naming "+files[0], func(text string) bool {
		return strings.Contains(text, `"crash_report":"`+files[0]+`"`)
	})
	if strings.Contains(logs.String(), "goroutine ") {
		t.Errorf("the goroutine dump reached the daemon's log")
	}
}
