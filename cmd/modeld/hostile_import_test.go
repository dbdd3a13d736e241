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

// `modeld import` of the 4-byte edit of a valid model (llama.block_count =
// 2^32-1, which once passed import and then killed the daemon on first use)
// exits 1 naming the key and the bound, and leaves the store as it was: the
// model imported before is still the only one.
func TestImportCommandRefusesBlockCountEdit(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.gguf")
	if err := ggufgen.WriteFile(goodPath, ggufgen.Tiny(ggufgen.BPE)); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, env, "import", goodPath, "--name", "good/tiny"); err != nil {
		t.Fatalf("import of the good model: %v\n%s", err, out)
	}
	before, err := runCLI(t, env, "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ggufgen.EditU32(good, "llama.block_count", 1<<32-1)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "blocks.gguf")
	if err := os.WriteFile(src, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "import", src, "--name", "evil/blocks")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LISTEN="+env["MODELD_LISTEN"])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("import exited with %v, want status 1\nstderr:\n%.2000s", err, stderr.String())
	}
	for _, want := range []string{"blocks.gguf", `"llama.block_count" is 4294967295, more than the limit of 512`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%.2000s", want, stderr.String())
		}
	}
	after, err := runCLI(t, env, "ls", "--json")
	if err != nil || after != before {
		t.Errorf("ls changed by the refused import: %v\nbefore %s\nafter  %s", err, before, after)
	}
	blobs, _ := filepath.Glob(filepath.Join(home, "models", "blobs", "sha256-*"))
	if len(blobs) != 1 {
		t.Errorf("blobs after the refused import: %v", blobs)
	}
}

// `modeld import` of an ONNX folder whose external-data file is a symlink to
// a file elsewhere (which imported with exit 0, and that file's bytes came
// back as the embedding) fails naming the link, and adds nothing.
func TestImportCommandRefusesSymlinkOutOfFolder(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}
	dir := t.TempDir()
	err := filepath.WalkDir(fixtureDir("embed-mean"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(fixtureDir("embed-mean"), p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		copyFile(t, p, filepath.Join(dir, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(secret, []byte("CANARY private key bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "onnx", "model.onnx_data")); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, env, "import", dir, "--name", "evil/symlink")
	if err == nil || !strings.Contains(err.Error(), "onnx/model.onnx_data is a symlink to "+secret+", outside the folder") {
		t.Fatalf("import = %v\n%s", err, out)
	}
	if ls, err := runCLI(t, env, "ls", "--json"); err != nil || strings.TrimSpace(ls) != "[]" {
		t.Fatalf("ls after the refused import: %v\n%s", err, ls)
	}
	blobs, _ := filepath.Glob(filepath.Join(home, "models", "blobs", "sha256-*"))
	if len(blobs) != 0 {
		t.Fatalf("blobs after the refused import: %v", blobs)
	}
}
