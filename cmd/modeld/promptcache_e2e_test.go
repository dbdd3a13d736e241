package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

type completionAnswer struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// stopDaemon sends SIGTERM and waits for the daemon to exit.
func stopDaemon(t *testing.T, cmd interface {
	Wait() error
}, signal func(os.Signal) error) {
	t.Helper()
	if err := signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon exited with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon still running 60s after SIGTERM")
	}
}

// A prompt survives a daemon restart in the home's kvcache/: the first
// request after the restart gets it from disk (cached tokens) with the
// same greedy text; modeld du shows the cache and prune --cache empties it.
func TestPromptCacheAcrossRestart(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := ggufgen.WriteFile(path, ggufgen.Options{Type: ggufgen.F16, Context: 2048}); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, env, "import", path, "--name", "t/cache"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	prompt := strings.Repeat("once upon a time there was a little girl who liked to play in the park. ", 12)
	body := map[string]any{"model": "t/cache", "prompt": prompt, "max_tokens": 24, "temperature": 0}

	cmd, base, _ := startDaemon(t, home)
	var first completionAnswer
	post(t, base, "/v1/completions", body, 200, &first)
	if first.Usage.PromptTokens < 200 || first.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first turn: %+v", first.Usage)
	}
	stopDaemon(t, cmd, cmd.Process.Signal)

	dir := filepath.Join(home, "kvcache")
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory %v (%v), want mode 0700", fi, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.kv"))
	if len(files) != 1 {
		t.Fatalf("%d cache files after the shutdown, want 1", len(files))
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file %v (%v), want mode 0600", fi, err)
	}
	out, err := runCLI(t, env, "du", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var du struct {
		PromptCache struct {
			Dir     string `json:"dir"`
			Entries int    `json:"entries"`
			Bytes   int64  `json:"bytes"`
		} `json:"prompt_cache"`
	}
	if err := json.Unmarshal([]byte(out), &du); err != nil || du.PromptCache.Entries != 1 || du.PromptCache.Bytes == 0 || du.PromptCache.Dir != dir {
		t.Fatalf("du --json: %+v (%v)\n%s", du, err, out)
	}
	if out, err := runCLI(t, env, "du"); err != nil || !strings.Contains(out, "prompt cache") {
		t.Fatalf("du: %v\n%s", err, out)
	}

	cmd, base, _ = startDaemon(t, home)
	var again completionAnswer
	post(t, base, "/v1/completions", body, 200, &again)
	if want := first.Usage.PromptTokens - 2; again.Usage.PromptTokensDetails.CachedTokens != want {
		t.Fatalf("after the restart: %d cached tokens, want %d", again.Usage.PromptTokensDetails.CachedTokens, want)
	}
	if again.Choices[0].Text != first.Choices[0].Text {
		t.Fatalf("after the restart the text is\n%q\nwant\n%q", again.Choices[0].Text, first.Choices[0].Text)
	}
	stopDaemon(t, cmd, cmd.Process.Signal)

	if out, err := runCLI(t, env, "prune", "--cache"); err != nil || !strings.Contains(out, "removed 1 cached prompt") {
		t.Fatalf("prune --cache: %v\n%s", err, out)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.kv")); len(files) != 0 {
		t.Fatalf("%d cache files after prune --cache", len(files))
	}

	// Off: nothing is written.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cmd, base, _ = startDaemon(t, home, "--prompt-cache=false")
	post(t, base, "/v1/completions", body, 200, &again)
	stopDaemon(t, cmd, cmd.Process.Signal)
	if files, _ := filepath.Glob(filepath.Join(dir, "*.kv")); len(files) != 0 {
		t.Fatalf("%d cache files with the cache off", len(files))
	}
}
