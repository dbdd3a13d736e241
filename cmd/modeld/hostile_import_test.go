package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// `modeld import` of a GGUF with metadata arrays nested 10^6 deep (which once
// overflowed the stack of the metadata parser: exit 2, "fatal error: stack
// overflow") ends with exit status 1 and one clear line, and leaves the
// store empty.
func TestImportCommandRefusesNestedArrays(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "nested.gguf")
	if err := os.WriteFile(src, ggufgen.NestedArrays(1_000_000), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "import", src, "--name", "evil/nested")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LISTEN="+freeAddr(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("import exited with %v, want status 1\nstderr:\n%.2000s", err, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{"nested.gguf", "not a valid GGUF file", "nested deeper than 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr does not say %q:\n%.2000s", want, msg)
		}
	}
	if strings.Contains(msg, "fatal error") || strings.Contains(msg, "goroutine ") || len(msg) > 2000 {
		t.Errorf("stderr is not one clear error:\n%.2000s", msg)
	}
	out, err := runCLI(t, map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}, "ls", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls after the refused import: %v\n%s", err, out)
	}
}
