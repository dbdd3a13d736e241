package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/modeld/modeld/internal/testenv"
)

// serveLogged runs `modeld serve` on home with its log (JSON) in a file, and
// returns once `modeld wait` says it answers.
func serveLogged(t *testing.T, home string, args ...string) (logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--", "serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LOG_FORMAT=json",
		"MODELD_LIB_DIR="+testenv.LibDir(t))
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "wait", "--timeout", "2m"); err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("wait: %v %s\n%s", err, out, b)
	}
	return logPath
}

// ptyOutput collects what a process writes to its terminal.
type ptyOutput struct{ *growing }

// waitFor waits until the output after offset from contains want, and
// returns the offset just after it.
func (p *ptyOutput) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	at := 0
	p.await(t, fmt.Sprintf("%q on the terminal", want), func(out string) bool {
		i := strings.Index(out[min(from, len(out)):], want)
		at = min(from, len(out)) + i + len(want)
		return i >= 0
	})
	return at
}

// accessLines returns the daemon's access log records for path.
func accessLines(t *testing.T, logPath, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "request" && rec["route"] == path {
			out = append(out, rec)
		}
	}
	return out
}

// startRun runs `modeld run model` on a pseudo-terminal of its own.
func startRun(t *testing.T, home, model string) (*os.File, *ptyOutput, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "run", model)
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 400})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = tty.Close() })
	out := &ptyOutput{newGrowing()}
	go func() {
		defer out.end()
		b := make([]byte, 4096)
		for {
			n, err := tty.Read(b)
			out.write(string(b[:n]))
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return tty, out, exited
}

// waitExit waits for the process of startRun to end.
func waitExit(t *testing.T, exited chan error, out *ptyOutput, what string) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("%s: exit %v\n%s", what, err, out)
		}
	case <-time.After(hangCeiling):
		t.Fatalf("still running %s after %s:\n%s", hangCeiling, what, out)
	}
}

// waitAccess waits until the daemon logged n access lines for path (a
// client has its answer a moment before the line is written), and returns them.
func waitAccess(t *testing.T, logPath, path string, n int) []map[string]any {
	t.Helper()
	var recs []map[string]any
	poll(t, fmt.Sprintf("%d access lines for %s in %s", n, path, logPath), func() bool {
		recs = accessLines(t, logPath, path)
		return len(recs) >= n
	})
	return recs
}

// `modeld run` in a terminal: the answer streams, Ctrl-C stops it (the
// daemon's generation is cancelled: its metrics and access line say so) and not the
// session; multi-line input, /set, /show and /clear work; /bye exits 0.
func TestRunInTerminal(t *testing.T) {
	home := longChatHome(t)
	logPath := serveLogged(t, home, "--context-size", "16384")

	tty, out, exited := startRun(t, home, "t/long")
	typeLine := func(s string) {
		t.Helper()
		if _, err := io.WriteString(tty, s+"\r"); err != nil {
			t.Fatal(err)
		}
	}

	at := out.waitFor(t, 0, "Type /? for help")
	at = out.waitFor(t, at, ">>> ")
	typeLine("/set num_predict 15000")
	at = out.waitFor(t, at, "num_predict = 15000")
	typeLine("/set temperature 0")
	at = out.waitFor(t, at, "temperature = 0")

	// A long answer streams; Ctrl-C stops it and the prompt comes back.
	typeLine("Tell me a long story.")
	at = out.waitFor(t, at, "Tell me a long story.")
	before := at
	out.await(t, "300 bytes of the answer", func(text string) bool { return len(text) >= before+300 })
	if _, err := tty.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	at = out.waitFor(t, before, "[stopped]")
	at = out.waitFor(t, at, ">>> ")
	rec, ok := readDaemonRecord(home)
	if !ok {
		t.Fatal("no daemon record")
	}
	waitMetric(t, rec.URL, `modeld_generations_cancelled_total{model="t/long"} 1`)
	chats := waitAccess(t, logPath, "/v1/chat/completions", 1)
	if c := chats[0]; c["cancelled"] != true || c["model"] != "t/long" || c["completion_tokens"].(float64) >= 15000 {
		t.Errorf("the stopped chat's access line = %v; want cancelled, model t/long, fewer than 15000 tokens", c)
	}

	// Lines joined by a backslash, then a """ block: each one question.
	typeLine("/set num_predict 3")
	at = out.waitFor(t, at, "num_predict = 3")
	typeLine(`first line \`)
	at = out.waitFor(t, at, "... ")
	typeLine("second line")
	at = out.waitFor(t, at, ">>> ")
	typeLine(`"""`)
	at = out.waitFor(t, at, "... ")
	typeLine("a block")
	at = out.waitFor(t, at, "... ")
	typeLine(`of lines"""`)
	at = out.waitFor(t, at, ">>> ")
	if n := len(waitAccess(t, logPath, "/v1/chat/completions", 3)); n != 3 {
		t.Errorf("%d chat requests after the stopped one and two multi-line prompts, want 3", n)
	}

	// Ctrl-C with a line half typed, or inside a """ block, drops what was
	// typed and prompts again: no question is sent, the session goes on.
	if _, err := io.WriteString(tty, "never sent"); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, "never sent")
	if _, err := tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, ">>> ")
	typeLine(`"""`)
	at = out.waitFor(t, at, "... ")
	typeLine("a block never sent")
	at = out.waitFor(t, at, "... ")
	if _, err := tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, ">>> ")

	typeLine("/set system You are terse.")
	at = out.waitFor(t, at, "system prompt set")
	typeLine("/set warmth 3")
	at = out.waitFor(t, at, `unknown setting "warmth"`)
	typeLine("/set")
	at = out.waitFor(t, at, "max_tokens")
	at = out.waitFor(t, at, "You are terse.")
	typeLine("/show")
	at = out.waitFor(t, at, "gguf")
	typeLine("/clear")
	at = out.waitFor(t, at, "the conversation is cleared")
	typeLine("/?")
	at = out.waitFor(t, at, "/bye")
	typeLine("/bye")
	waitExit(t, exited, out, "/bye")
	if n := len(waitAccess(t, logPath, "/v1/chat/completions", 3)); n != 3 {
		t.Errorf("%d chat requests, want 3: a Ctrl-C'd line was sent", n)
	}
}

// Ctrl-D, or Ctrl-C, at an empty prompt ends the session too.
func TestRunCtrlD(t *testing.T) {
	home := chatHome(t)
	serveLogged(t, home)
	for name, key := range map[string]byte{"Ctrl-D": 4, "Ctrl-C": 3} {
		tty, out, exited := startRun(t, home, "t/chat")
		out.waitFor(t, 0, ">>> ")
		if _, err := tty.Write([]byte{key}); err != nil {
			t.Fatal(err)
		}
		waitExit(t, exited, out, name)
	}
}

// With a PROMPT (and output that is not a terminal) run answers once and
// exits: chat prints the answer, an embedding model its vector, a classifier
// its labels. Without a daemon it says how to start one.
func TestRunOnce(t *testing.T) {
	home := chatHome(t)
	importFixtures(t, home)
	env := map[string]string{"MODELD_HOME": home}
	if _, err := runCLI(t, env, "run", "t/chat", "Hello"); !errors.Is(err, errNoDaemon) ||
		!strings.Contains(err.Error(), "modeld serve --home "+home) {
		t.Fatalf("run without a daemon: %v", err)
	}
	logPath := serveLogged(t, home, "--log-level", "debug")

	out, err := runCLI(t, env, "run", "t/chat", "Hello")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("run t/chat: %v %q", err, out)
	}
	if c := waitAccess(t, logPath, "/v1/chat/completions", 1); len(c) != 1 || c[0]["cancelled"] != false || c[0]["status"] != 200.0 {
		t.Errorf("chat access lines %v", c)
	}
	checkDaemonLog(t, logPath)
	// Input that is not a terminal is the prompt: one answer, then exit.
	piped := exec.Command(os.Args[0], "-test.run=^$", "--", "run", "t/chat")
	piped.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home)
	piped.Stdin = strings.NewReader("Hello from a pipe\n")
	if b, err := piped.Output(); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Fatalf("echo ... | modeld run t/chat: %v %q", err, b)
	}
	waitAccess(t, logPath, "/v1/chat/completions", 2)
	out, err = runCLI(t, env, "run", "t/embed", "first text")
	var vec []float64
	if err != nil || json.Unmarshal([]byte(out), &vec) != nil || len(vec) == 0 {
		t.Fatalf("run t/embed: %v %q", err, out)
	}
	out, err = runCLI(t, env, "run", "t/classify", "a wonderful film")
	if err != nil || len(strings.Split(strings.TrimSpace(out), "\n")) < 2 {
		t.Fatalf("run t/classify: %v %q", err, out)
	}
	out, err = runCLI(t, env, "run", "t/nli", "--labels", "sports,politics", "the match was won")
	if err != nil || !strings.Contains(out, "sports") || !strings.Contains(out, "politics") {
		t.Fatalf("run t/nli --labels: %v %q", err, out)
	}
	if _, err := runCLI(t, env, "run", "t/missing", "x"); err == nil || !strings.Contains(err.Error(), "t/missing") {
		t.Fatalf("run of a missing model: %v", err)
	}
}

// checkDaemonLog: no record of the daemon's log has a key twice; the
// runner's start line names the model id and the file apart; llama.cpp's
// output (at debug) is records of their own, not lines inside a record.
func checkDaemonLog(t *testing.T, logPath string) {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	native, started := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("a log line that is not JSON: %s", line)
		}
		seen := map[string]bool{}
		rec := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if seen[k.(string)] {
				t.Errorf("key %q twice: %s", k, line)
			}
			seen[k.(string)], rec[k.(string)] = true, v
		}
		msg, _ := rec["msg"].(string)
		if l, _ := rec["line"].(string); strings.Contains(l, "level=") || strings.Contains(l, `"level"`) {
			t.Errorf("a log line inside a log line: %s", line)
		}
		if strings.HasPrefix(msg, "llama.cpp: ") && rec["pid"] != nil {
			native++
		}
		if msg == "llama: runner started" {
			started++
			if rec["model"] != "t/chat" || !strings.HasSuffix(fmt.Sprint(rec["model_path"]), ".gguf") && rec["model_path"] == nil {
				t.Errorf("runner start line: %s", line)
			}
		}
	}
	if native == 0 || started != 1 {
		t.Errorf("%d llama.cpp records and %d runner start lines in the debug log", native, started)
	}
}
