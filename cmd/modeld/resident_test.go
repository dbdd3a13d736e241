package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/ggufgen"
)

// The models to load again are the ready ones, busy first, then the most
// recently idle; a keep-alive a request set travels with its model, the
// configured one does not (a changed setting applies at the next start).
func TestResidentModelsOrder(t *testing.T) {
	now := time.Now()
	five := 5 * time.Minute
	s := cache.Snapshot{Models: []cache.ModelStatus{
		{ID: "old", State: "ready", KeepAlive: five, IdleSince: now.Add(-time.Hour)},
		{ID: "busy", State: "ready", KeepAlive: five},
		{ID: "recent", State: "ready", KeepAlive: -1, IdleSince: now.Add(-time.Minute)},
		{ID: "loading", State: "loading", KeepAlive: five},
		{ID: "crashed", State: "crashed", KeepAlive: five, IdleSince: now},
		{ID: "unload-at-idle", State: "ready", KeepAlive: 0, IdleSince: now},
	}}
	got := residentModels(s, five)
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if want := []string{"busy", "recent", "old"}; !slices.Equal(ids, want) {
		t.Fatalf("resident models %v, want %v", ids, want)
	}
	if got[0].KeepAlive != nil || got[2].KeepAlive != nil || got[1].KeepAlive == nil || *got[1].KeepAlive != -1 {
		t.Fatalf("keep-alives %+v, want only recent's (-1) kept", got)
	}
}

// logLines collects a daemon's whole log.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) add(s string, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// loadedModels is /v1/system's list of loaded models with their states.
func loadedModels(t *testing.T, base string) map[string]string {
	t.Helper()
	var sys struct {
		Loaded cache.Snapshot `json:"loaded"`
	}
	getJSON(t, base+"/v1/system", &sys)
	out := map[string]string{}
	for _, m := range sys.Loaded.Models {
		out[m.ID] = m.State
	}
	return out
}

// A model loaded when the daemon stops is loaded again when it starts,
// before any request, and the first request then finds its prompt in the
// loaded model: the same greedy text, the prompt from the cache. Off, or
// with an unreadable record, nothing is loaded and the record is gone.
func TestRestoreModelsAcrossRestart(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := ggufgen.WriteFile(path, ggufgen.Options{Type: ggufgen.F16, Context: 2048}); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, env, "import", path, "--name", "t/resident"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	prompt := strings.Repeat("once upon a time there was a little girl who liked to play in the park. ", 12)
	body := map[string]any{"model": "t/resident", "prompt": prompt, "max_tokens": 24, "temperature": 0}
	record := filepath.Join(home, residentFile)

	cmd, base, _ := startDaemon(t, home)
	var first completionAnswer
	post(t, base, "/v1/completions", body, 200, &first)
	stopDaemon(t, cmd, cmd.Process.Signal)
	b, err := os.ReadFile(record)
	if err != nil || !strings.Contains(string(b), `"t/resident"`) {
		t.Fatalf("record after the stop: %v\n%s", err, b)
	}
	if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record mode %v (%v), want 0600", fi.Mode(), err)
	}

	logs := &logLines{}
	cmd, base = startDaemonLines(t, home, logs.add)
	deadline := time.Now().Add(90 * time.Second)
	for loadedModels(t, base)["t/resident"] != "ready" {
		if time.Now().After(deadline) {
			t.Fatalf("the model was not loaded again within 90 s of the start:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The restore logs its line and removes the record once the load it
	// started has returned, just after the model shows as ready.
	for !strings.Contains(logs.String(), "restored a model loaded at the last stop") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line of the restore:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, err := os.Stat(record); !os.IsNotExist(err); _, err = os.Stat(record) {
		if time.Now().After(deadline) {
			t.Fatalf("the record is still there after the restore (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var again completionAnswer
	post(t, base, "/v1/completions", body, 200, &again)
	if want := first.Usage.PromptTokens - 2; again.Usage.PromptTokensDetails.CachedTokens != want || again.Choices[0].Text != first.Choices[0].Text {
		t.Fatalf("after the restart: %d cached, text\n%q\nwant %d cached, text\n%q", again.Usage.PromptTokensDetails.CachedTokens,
			again.Choices[0].Text, want, first.Choices[0].Text)
	}
	stopDaemon(t, cmd, cmd.Process.Signal)

	// Off: the record is removed and nothing is loaded.
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no record after the second stop: %v", err)
	}
	cmd, base = startDaemonLines(t, home, func(string, bool) {}, "--restore-models=false")
	for _, err := os.Stat(record); err == nil; _, err = os.Stat(record) {
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatal("the record stays with --restore-models=false")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := loadedModels(t, base); len(got) != 0 {
		t.Fatalf("loaded with --restore-models=false: %v", got)
	}
	stopDaemon(t, cmd, cmd.Process.Signal)
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Fatalf("a record was written with --restore-models=false (%v)", err)
	}

	// An unreadable record: one warning, removed, the daemon serves.
	if err := os.WriteFile(record, []byte(`{"models": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	logs = &logLines{}
	cmd, base = startDaemonLines(t, home, logs.add)
	for !strings.Contains(logs.String(), "unreadable") {
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			t.Fatalf("no warning for an unreadable record:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	post(t, base, "/v1/completions", body, 200, &again)
	stopDaemon(t, cmd, cmd.Process.Signal)
}
