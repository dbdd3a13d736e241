package main

import (
	"strings"
	"testing"
)

// --runner-wrapper names a program that must exist when the daemon starts;
// its words are kept apart, and empty means no wrapper.
func TestConfigRunnerWrapper(t *testing.T) {
	home := t.TempDir()
	env := envOf(map[string]string{"MODELD_HOME": home})
	c, err := loadConfig(flags(t, "--runner-wrapper", "nice -n 10"), env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.RunnerWrapper, "|") != "nice|-n|10" {
		t.Fatalf("wrapper = %q", c.RunnerWrapper)
	}
	if c, err = loadConfig(flags(t), env); err != nil || c.RunnerWrapper != nil {
		t.Fatalf("default wrapper = %q, %v", c.RunnerWrapper, err)
	}
	_, err = loadConfig(flags(t, "--runner-wrapper", "no-such-emulator-here -L /x"), env)
	if err == nil || !strings.Contains(err.Error(), "runner-wrapper") || !strings.Contains(err.Error(), "no-such-emulator-here") {
		t.Fatalf("a missing wrapper program: %v", err)
	}
}
