package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/probe"
)

// flipBlobByte flips one byte of a read-only blob in place.
func flipBlobByte(t *testing.T, path string, at int64) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x80
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCommandFindsFlippedByte(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}
	src, data := tinyGGUFFile(t)
	if out, err := runCLI(t, env, "import", src, "--name", "local/tiny"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	out, err := runCLI(t, env, "verify")
	if err != nil || !strings.Contains(out, "ok") || !strings.Contains(out, "local/tiny") {
		t.Fatalf("verify of a good store: %v\n%s", err, out)
	}
	st, err := models.Open(filepath.Join(home, "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Get("local/tiny")
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := st.FilePath(m, m.Files[0].Path)
	flipBlobByte(t, blob, int64(len(data)-1))

	out, err = runCLI(t, env, "verify", "local/tiny")
	if err == nil || !strings.Contains(out, "CORRUPT") || !strings.Contains(out, m.Files[0].Digest) {
		t.Fatalf("verify after a flipped byte: err %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "verify", "--json")
	var rep models.VerifyReport
	if jerr := json.Unmarshal([]byte(strings.SplitN(out, "\nError", 2)[0]), &rep); err == nil || jerr != nil ||
		len(rep.Checks) != 1 || rep.Checks[0].Status != models.CheckCorrupt || !strings.HasPrefix(rep.Checks[0].Got, "sha256:") {
		t.Errorf("verify --json: %v, %v\n%s", err, jerr, out)
	}
}

func TestRemoveAndPruneCorruptManifestCommands(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}
	src, _ := tinyGGUFFile(t)
	for _, id := range []string{"local/a", "local/b", "local/c"} {
		if out, err := runCLI(t, env, "import", src, "--name", id); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
	}
	manifest := func(id string) string { return filepath.Join(home, "models", "manifests", "local", id, "@latest.json") }
	for _, id := range []string{"a", "b"} {
		if err := os.WriteFile(manifest(id), []byte(`{"schema_version":1,"id":"local/`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(t, env, "ls")
	if err != nil || !strings.Contains(out, "local/c") || strings.Contains(out, "local/a ") {
		t.Fatalf("ls with corrupt manifests: %v\n%s", err, out)
	}
	if out, err := runCLI(t, env, "show", "local/a"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("show of a corrupt manifest: %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "rm", "local/a")
	if err != nil || !strings.Contains(out, "deleted local/a") {
		t.Fatalf("rm of a corrupt manifest: %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "prune")
	if err != nil || !strings.Contains(out, "removed the corrupt manifest of local/b") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := os.Stat(manifest(id)); !os.IsNotExist(err) {
			t.Errorf("manifest of local/%s: %v", id, err)
		}
	}
	if out, err := runCLI(t, env, "verify"); err != nil {
		t.Errorf("verify after the cleanup: %v\n%s", err, out)
	}
}

// The daemon's loader never gets a model whose blob does not match its digest.
func TestLoadRefusesCorruptBlob(t *testing.T) {
	rt := testRuntime(t, probe.Info{}, Config{})
	rt.libs = backends.Libs{Root: testenv.LibDir(t)}
	errFake := errors.New("fake loader")
	var loaded []string
	fake := func(_ context.Context, spec cache.Spec, _ *loadPlan) (cache.Instance, error) {
		loaded = append(loaded, spec.ID)
		return nil, errFake
	}
	rt.loaders = map[string]loaderFunc{"llama": fake, "onnx": fake}
	ctx := context.Background()
	for _, tc := range []struct{ id, file string }{{"t/chat", ""}, {"t/embed", "onnx/model.onnx"}} {
		spec, err := rt.resolve(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.load(ctx, spec); !errors.Is(err, errFake) {
			t.Fatalf("%s: load of the intact model: %v", tc.id, err)
		}
		m := spec.Data.(*loadPlan).manifest
		file := tc.file
		if file == "" {
			file = m.GGUF.File
		}
		blob, err := rt.store.FilePath(m, file)
		if err != nil {
			t.Fatal(err)
		}
		flipBlobByte(t, blob, 40)
		_, err = rt.load(ctx, spec)
		if !errors.Is(err, models.ErrCorruptBlob) || !strings.Contains(err.Error(), "modeld verify") {
			t.Errorf("%s: load of a flipped byte: %v", tc.id, err)
		}
	}
	if len(loaded) != 2 {
		t.Errorf("loader calls %v, want one per intact model", loaded)
	}
}
