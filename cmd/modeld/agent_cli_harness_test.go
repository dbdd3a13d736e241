package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/testenv"
)

// What the agent CLI tests share: a daemon whose whole log is kept, a
// recording proxy in front of it, the pinned CLIs of clients/ run in a
// fresh home with the settings modeld launch gives them, and the access
// lines each turn left.

// agentModel is the model the agent CLIs run on: Qwen2.5's real vocabulary
// and template, a 32k context and answers that end by themselves
// (testenv.LlamaAgentModel).
var agentModel = realModel{"t/agent", "qwen2", "Qwen-Qwen2.5-7B-Instruct"}

// agentCLITimeout bounds one run of an agent CLI: its first prompt (~5k to
// ~11k tokens) is evaluated on 2 shared cores, and the CLIs take tens of
// seconds to start.
const agentCLITimeout = 10 * time.Minute

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is the length so far: a mark from which later lines are read.
func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// agentDaemon imports the agent model into a fresh home and starts a daemon
// on it with args, keeping its whole log; the log is printed when the test
// fails.
func agentDaemon(t *testing.T, args ...string) (base string, logs *syncBuffer) {
	t.Helper()
	return agentDaemonWith(t, nil, args...)
}

// agentDaemonWith is agentDaemon with more models: files by id.
func agentDaemonWith(t *testing.T, more map[string]string, args ...string) (base string, logs *syncBuffer) {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	files := map[string]string{agentModel.id: testenv.LlamaAgentModel(t, agentModel.arch, agentModel.template)}
	for id, path := range more {
		files[id] = path
	}
	for id, path := range files {
		if out, err := runCLI(t, env, "import", path, "--name", id); err != nil {
			t.Fatalf("import %s: %v\n%s", id, err, out)
		}
	}
	logs = &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	_, base = startDaemonLines(t, home, func(line string, _ bool) { logs.Write([]byte(line + "\n")) }, args...)
	return base, logs
}

// accessLine is the daemon's access log line of one request.
type accessLine struct {
	Route      string `json:"route"`
	Path       string `json:"path"`
	Model      string `json:"model"`
	Status     int    `json:"status"`
	Prompt     int    `json:"prompt_tokens"`
	Completion int    `json:"completion_tokens"`
	Cached     int    `json:"cached_tokens"`
	Reason     string `json:"reason"`
}

// agentAccessLines are the access lines logged after mark (a logs.Len()).
func agentAccessLines(t *testing.T, logs *syncBuffer, mark int) []accessLine {
	t.Helper()
	var out []accessLine
	for _, line := range strings.Split(logs.String()[mark:], "\n") {
		if !strings.Contains(line, `"msg":"request"`) {
			continue
		}
		var l accessLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("access line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// recorded is one request an agent CLI sent, as the recording proxy saw it.
type recorded struct {
	Method, Path string
	Body         map[string]any // nil when the body is not a JSON object
	Raw          []byte
}

// recorder is a reverse proxy in front of the daemon that keeps every
// request body, so a test can read what a CLI sent.
type recorder struct {
	URL  string
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t *testing.T, base string) *recorder {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // streams pass through as they come
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec := recorded{Method: req.Method, Path: req.URL.Path, Raw: raw}
		_ = json.Unmarshal(raw, &rec.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, rec)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(raw))
		req.ContentLength = int64(len(raw))
		req.Host = target.Host // the daemon answers loopback Host names only
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// since returns the requests recorded after the first n.
func (r *recorder) since(n int) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs[n:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// agentBin returns the path of a pinned agent CLI in clients/node_modules,
// failing with the command that installs it when it is missing or still
// npm's placeholder (its postinstall not run).
func agentBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(clientsDir, "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("the agent CLI %s is not installed (%v: %s): run make test-clients", name, err, bytes.TrimSpace(out))
	}
	return p
}

// agentRun is one run of an agent CLI.
type agentRun struct {
	Stdout, Stderr string
	Took           time.Duration
}

// runAgent runs bin with args in dir, with env only (no variable of the
// test's own environment leaks in but PATH), and fails the test when it
// exits non-zero or runs past agentCLITimeout.
func runAgent(t *testing.T, dir string, env []string, bin string, args ...string) agentRun {
	t.Helper()
	return runAgentStdin(t, dir, env, bin, "", args...)
}

// runAgentStdin is runAgent with stdin as the CLI's standard input.
func runAgentStdin(t *testing.T, dir string, env []string, bin, stdin string, args ...string) agentRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1", "CI=1"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	run := agentRun{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("%s %s ran past %s\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), agentCLITimeout, run.Stdout, run.Stderr)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), strings.Join(args, " "), err, run.Stdout, run.Stderr)
	}
	return run
}

// agentHome is a fresh home for one CLI: HOME and the XDG directories under
// it, plus the settings modeld launch gives the CLI for target (its files
// written there, its environment returned).
func agentHome(t *testing.T, ag agent, target launchTarget) (home string, env []string, s agentSettings) {
	t.Helper()
	home = t.TempDir()
	env = []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
	}
	target.Home = home
	target.getenv = envLookup(env)
	s, err := ag.settings(target)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files {
		data, err := f.contents(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.Path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home, append(env, s.Env...), s
}

// envLookup reads NAME=value pairs as getenv does.
func envLookup(env []string) func(string) string {
	return func(k string) string {
		for _, e := range env {
			if name, v, ok := strings.Cut(e, "="); ok && name == k {
				return v
			}
		}
		return ""
	}
}

// largest is the access line on route with the most prompt tokens: the
// agent's main request of a turn (its side requests, titles and the like,
// are smaller).
func largest(t *testing.T, lines []accessLine, route string) accessLine {
	t.Helper()
	var best accessLine
	for _, l := range lines {
		if l.Route == route && l.Prompt > best.Prompt {
			best = l
		}
	}
	if best.Prompt == 0 {
		t.Fatalf("no %s request with a prompt in %+v", route, lines)
	}
	return best
}

// checkStatuses fails the test on an access line with an error status.
func checkStatuses(t *testing.T, what string, lines []accessLine) {
	t.Helper()
	for _, l := range lines {
		if l.Status >= 400 {
			t.Errorf("%s: %s answered %d: %s", what, l.Route, l.Status, l.Reason)
		}
	}
}

// requestShape is what a CLI's requests to one route look like: their
// top-level fields and the types of the tools they offer, names only.
type requestShape struct {
	Fields    []string `json:"fields"`
	ToolTypes []string `json:"tool_types"`
}

// shapesFile holds the request shapes each pinned CLI was seen to send.
var shapesFile = filepath.Join("testdata", "agent_cli_requests.json")

// shapesOf collects the shapes of reqs by "METHOD path" (JSON bodies only).
func shapesOf(reqs []recorded) map[string]requestShape {
	fields := map[string]map[string]bool{}
	tools := map[string]map[string]bool{}
	for _, r := range reqs {
		if r.Body == nil {
			continue
		}
		k := r.Method + " " + r.Path
		if fields[k] == nil {
			fields[k], tools[k] = map[string]bool{}, map[string]bool{}
		}
		for f := range r.Body {
			fields[k][f] = true
		}
		ts, _ := r.Body["tools"].([]any)
		for _, x := range ts {
			typ := "(none)"
			if m, ok := x.(map[string]any); ok {
				if s, ok := m["type"].(string); ok {
					typ = s
				}
			}
			tools[k][typ] = true
		}
	}
	out := map[string]requestShape{}
	for k := range fields {
		out[k] = requestShape{Fields: sortedKeys(fields[k]), ToolTypes: sortedKeys(tools[k])}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkShapes compares the requests cli sent with its entry in shapesFile
// and fails naming each route, field or tool type that is new: a new
// version of the CLI that sends something modeld was never tested with.
// With MODELD_RECORD_AGENT_SHAPES=1 it writes what it saw instead (merged
// into the file), for a deliberate update after a CLI's pin moves.
func checkShapes(t *testing.T, cli string, reqs []recorded) {
	t.Helper()
	seen := shapesOf(reqs)
	all := map[string]map[string]requestShape{}
	if b, err := os.ReadFile(shapesFile); err == nil {
		if err := json.Unmarshal(b, &all); err != nil {
			t.Fatalf("%s: %v", shapesFile, err)
		}
	} else if os.Getenv("MODELD_RECORD_AGENT_SHAPES") == "" {
		t.Fatalf("%s: %v", shapesFile, err)
	}
	if os.Getenv("MODELD_RECORD_AGENT_SHAPES") == "1" {
		if all[cli] == nil {
			all[cli] = map[string]requestShape{}
		}
		for k, s := range seen {
			old := all[cli][k]
			all[cli][k] = requestShape{Fields: union(old.Fields, s.Fields), ToolTypes: union(old.ToolTypes, s.ToolTypes)}
		}
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(shapesFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shapesFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := all[cli]
	for k, s := range seen {
		w, ok := want[k]
		if !ok {
			t.Errorf("%s sent %s, a route new to %s: test it, then record it with MODELD_RECORD_AGENT_SHAPES=1", cli, k, shapesFile)
			continue
		}
		for _, f := range s.Fields {
			if !contains(w.Fields, f) {
				t.Errorf("%s: %s has the field %q, new to %s: check what the dialect does with it, then record it with MODELD_RECORD_AGENT_SHAPES=1", cli, k, f, shapesFile)
			}
		}
		for _, typ := range s.ToolTypes {
			if !contains(w.ToolTypes, typ) {
				t.Errorf("%s: %s offers a tool of type %q, new to %s: check what the dialect does with it, then record it with MODELD_RECORD_AGENT_SHAPES=1", cli, k, typ, shapesFile)
			}
		}
	}
}

func union(a, b []string) []string {
	m := map[string]bool{}
	for _, s := range append(append([]string(nil), a...), b...) {
		m[s] = true
	}
	return sortedKeys(m)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
