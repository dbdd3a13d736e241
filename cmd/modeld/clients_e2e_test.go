package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/testenv"
)

// clientsDir holds the pinned official API clients (clients/package.json and
// its lock file) and the scripts that drive them against a running daemon.
var clientsDir = filepath.Join("..", "..", "clients")

// runClient runs clients/<script> with node against the daemon at base and
// returns its standard output. The script reads MODELD_URL (the daemon's
// base URL, no /v1) and the extra env, prints what the test checks, and
// exits non-zero (with the reason on stderr) when a client call fails or an
// assertion of its own does not hold. A missing node or client install is a
// failure that names the command that installs it.
func runClient(t *testing.T, base, script string, env map[string]string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: apt-get install nodejs npm, then make test-clients")
	}
	if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", ".package-lock.json")); err != nil {
		t.Fatal("the API clients are not installed: run make test-clients (npm ci in clients/)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = clientsDir
	cmd.Env = append(os.Environ(), "MODELD_URL="+base, "NO_COLOR=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("node %s ran past 5 minutes\nstdout:\n%s\nstderr:\n%s", script, stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// realModel is a tiny random-weight GGUF with a real vocabulary and chat
// template (internal/testenv.LlamaChatModel: the vocabulary's architecture
// and the template's name) and the id it is imported as.
type realModel struct{ id, arch, template string }

var (
	qwenModel = realModel{"t/qwen", "qwen2", "Qwen-Qwen2.5-7B-Instruct"}
	r1Model   = realModel{"t/r1", "qwen2", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"}
)

// importReal imports each model into home.
func importReal(t *testing.T, home string, ms ...realModel) {
	t.Helper()
	env := map[string]string{"MODELD_HOME": home}
	for _, m := range ms {
		if out, err := runCLI(t, env, "import", testenv.LlamaChatModel(t, m.arch, m.template), "--name", m.id); err != nil {
			t.Fatalf("import %s: %v\n%s", m.id, err, out)
		}
	}
}

// realDaemon imports ms into a new home and starts a daemon on it with
// args; the daemon's log is printed when the test fails. It returns the
// home and the daemon's base URL.
func realDaemon(t *testing.T, ms []realModel, args ...string) (home, base string) {
	t.Helper()
	home = t.TempDir()
	importReal(t, home, ms...)
	_, base, logs := startDaemon(t, home, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	return home, base
}
