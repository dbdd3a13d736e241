package main

import (
	"strings"
	"testing"
)

// TestRunnerCommand: `modeld runner` is hidden, takes its settings from its
// own flags only (a broken config file does not stop it from parsing them),
// and refuses to start without a model and socket.
func TestRunnerCommand(t *testing.T) {
	home := t.TempDir()
	env := envOf(map[string]string{"MODELD_HOME": home, "MODELD_CONFIG": home + "/absent.json"})
	var out, errb strings.Builder
	root := newRootCommand(&out, &errb, env)
	cmd, _, err := root.Find([]string{"runner"})
	if err != nil || cmd.Name() != "runner" || !cmd.Hidden {
		t.Fatalf("runner command: %v, %v", cmd, err)
	}

	root.SetArgs([]string{"runner", "--slots=2"})
	err = root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--model is required") || !strings.Contains(err.Error(), "--lib-dir is required") {
		t.Errorf("without flags: %v", err)
	}

	errb.Reset()
	root = newRootCommand(&out, &errb, env)
	root.SetArgs([]string{"runner", "-h"})
	if err := root.Execute(); err != nil {
		t.Errorf("help: %v", err)
	}
	if !strings.Contains(errb.String(), "-socket") {
		t.Errorf("help does not list the flags: %q", errb.String())
	}
}
