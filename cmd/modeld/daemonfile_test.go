package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modeld/modeld/models"
)

// The CLI acts on the daemon that serves its home, and only on it: a daemon on
// home A, listening where the CLI of home B would look by default, is not
// asked to delete B's model; B's store is changed directly and A keeps its
// model. The daemon records its address in its home and removes the record
// when it stops; a record left by a killed daemon is recognised as stale.
func TestCLITalksToTheDaemonOfItsHome(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	src, _ := tinyGGUFFile(t)
	for _, home := range []string{homeA, homeB} {
		if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", src, "--name", "local/tiny"); err != nil {
			t.Fatalf("import into %s: %v\n%s", home, err, out)
		}
	}
	cmd, base, _ := startDaemon(t, homeA)
	addr := strings.TrimPrefix(base, "http://")

	rec, ok := readDaemonRecord(homeA)
	if !ok || rec.PID != cmd.Process.Pid || rec.URL != base || !sameHome(rec.Home, homeA) {
		t.Fatalf("daemon record of home A = %+v (ok %v), want pid %d at %s", rec, ok, cmd.Process.Pid, base)
	}

	// The case: the CLI of home B, pointed at A's daemon by --listen.
	out, err := runCLI(t, map[string]string{"MODELD_LISTEN": addr}, "rm", "--home", homeB, "local/tiny")
	if err != nil || !strings.Contains(out, "deleted local/tiny") || strings.Contains(out, "unloaded by the daemon") {
		t.Fatalf("rm --home B: %v\n%s", err, out)
	}
	if _, err := openStoreAt(t, homeB).Get("local/tiny"); err == nil {
		t.Errorf("rm --home B left the model in B")
	}
	if res, err := http.Get(base + "/v1/models/local/tiny"); err != nil || res.StatusCode != 200 {
		t.Fatalf("A's daemon lost local/tiny: %v %v", res, err)
	}
	// Named by --host, A's daemon is refused to a CLI that names home B.
	if _, err := runCLI(t, nil, "ps", "--home", homeB, "--host", addr); err == nil ||
		!strings.Contains(err.Error(), "serves the home "+homeA) {
		t.Errorf("ps --home B --host A: %v", err)
	}
	// With home A, the CLI finds the daemon by its record, whatever --listen says.
	env := map[string]string{"MODELD_HOME": homeA, "MODELD_LISTEN": freeAddr(t)}
	if out, err := runCLI(t, env, "wait"); err != nil || out != "modeld is ready at "+base+"\n" {
		t.Errorf("wait: %v %q", err, out)
	}
	if out, err := runCLI(t, env, "ps", "--json"); err != nil || !json.Valid([]byte(out)) {
		t.Errorf("ps: %v\n%s", err, out)
	}
	if out, err := runCLI(t, map[string]string{"MODELD_HOST": base}, "ps"); err != nil {
		t.Errorf("ps with MODELD_HOST (the default home unnamed): %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "rm", "local/tiny")
	if err != nil || !strings.Contains(out, "unloaded by the daemon") {
		t.Errorf("rm through A's daemon: %v\n%s", err, out)
	}

	// Stopped, the daemon removes its record.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(homeA, daemonFile)); !os.IsNotExist(err) {
		t.Errorf("the record outlived the daemon: %v", err)
	}

	// A killed daemon's record is stale: the CLI says none runs, and how to start one.
	homeC := t.TempDir()
	cmdC, _, _ := startDaemon(t, homeC)
	if err := cmdC.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmdC.Wait() // killed
	if _, err := os.Stat(filepath.Join(homeC, daemonFile)); err != nil {
		t.Fatalf("a killed daemon left no record to test with: %v", err)
	}
	_, err = runCLI(t, map[string]string{"MODELD_HOME": homeC, "MODELD_LISTEN": freeAddr(t)}, "ps")
	if err == nil || !strings.Contains(err.Error(), "modeld is not running for the home "+homeC) ||
		!strings.Contains(err.Error(), "modeld serve --home "+homeC) {
		t.Errorf("ps after a kill: %v", err)
	}
	if _, err := runCLI(t, map[string]string{"MODELD_HOME": homeC, "MODELD_LISTEN": freeAddr(t)}, "wait", "--timeout", "200ms"); err == nil ||
		!strings.Contains(err.Error(), "no daemon answered in time") {
		t.Errorf("wait without a daemon: %v", err)
	}
}

func openStoreAt(t *testing.T, home string) *models.Store {
	t.Helper()
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// --version and the version command print the same line.
func TestVersionFlag(t *testing.T) {
	flagOut, err := runCLI(t, nil, "--version")
	if err != nil || !strings.HasPrefix(flagOut, "modeld ") {
		t.Fatalf("--version = %q, %v", flagOut, err)
	}
	cmdOut, err := runCLI(t, nil, "version")
	if err != nil || cmdOut != flagOut {
		t.Fatalf("version = %q, --version = %q (%v)", cmdOut, flagOut, err)
	}
}
