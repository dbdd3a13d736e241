// Tests of scripts/bootstrap against a fake npm that packs tarballs made here, so
// that checksum failures, interruptions and re-runs are exercised without a
// network. The real install is exercised by `make test`, which runs the bootstrap
// before the Go tests that load the libraries.
package scripts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type fakePkg struct {
	spec  string
	files map[string]string // path in tarball -> content
}

var (
	llamaPkg = fakePkg{"@node-llama-cpp/linux-x64@3.21.1", map[string]string{
		"package/package.json":                      "{}",
		"package/bins/linux-x64/libllama.v0.4.0.so": "llama",
		"package/bins/linux-x64/libggml.v0.4.0.so":  "ggml",
		"package/bins/linux-x64/libggml-base.so":    "base",
		"package/bins/linux-x64/libggml-cpu-x64.so": "cpu",
		"package/bins/linux-x64/llama-addon.node":   "not a lib",
	}}
	ortPkg = fakePkg{"onnxruntime-node@1.30.0", map[string]string{
		"package/bin/napi-v6/linux/x64/libonnxruntime.so.1":      "ort",
		"package/bin/napi-v6/linux/x64/onnxruntime_binding.node": "binding",
	}}
	vulkanPkg = fakePkg{"@node-llama-cpp/linux-x64-vulkan@3.21.1", map[string]string{
		"package/bins/linux-x64-vulkan/libggml-vulkan.so": "vulkan",
		"package/bins/linux-x64-vulkan/libggml-base.so":   "other base",
	}}
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// env is a copy of the bootstrap with its own pinned sums and a fake npm on PATH.
type env struct {
	t      *testing.T
	dir    string // holds bootstrap + runtime-libs.sha256
	bin    string // fake npm
	libDir string
	cache  string // XDG_CACHE_HOME: where native builds keep their trees
	count  string // file the fake npm appends each packed spec to
}

func newEnv(t *testing.T, pkgs []fakePkg, corrupt string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), bin: t.TempDir(), libDir: filepath.Join(t.TempDir(), "lib"), cache: t.TempDir()}
	e.count = filepath.Join(e.bin, "packed.log")
	src, err := os.ReadFile("bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "bootstrap"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(e.bin, "tarballs")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	var sums strings.Builder
	for i, p := range pkgs {
		data := tgz(t, p.files)
		sum := sha256.Sum256(data)
		hexsum := hex.EncodeToString(sum[:])
		if p.spec == corrupt {
			hexsum = strings.Repeat("0", 64)
		}
		fmt.Fprintf(&sums, "%s  %s\n", hexsum, p.spec)
		if err := os.WriteFile(filepath.Join(store, fmt.Sprintf("%d.tgz", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The fake npm maps each spec to its tarball by index.
		if err := os.WriteFile(filepath.Join(store, fmt.Sprintf("%d.spec", i)), []byte(p.spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.dir, "runtime-libs.sha256"), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	npm := `#!/bin/sh
# fake npm: "npm pack --silent SPEC" copies the tarball made for SPEC into the cwd.
spec="$3"
[ -n "$FAIL_SPEC" ] && [ "$spec" = "$FAIL_SPEC" ] && { echo "network down" >&2; exit 1; }
echo "$spec" >> "` + e.count + `"
for f in "` + store + `"/*.spec; do
  if [ "$(cat "$f")" = "$spec" ]; then cp "${f%.spec}.tgz" "./pkg.tgz"; exit 0; fi
done
echo "404 $spec" >&2; exit 1
`
	if err := os.WriteFile(filepath.Join(e.bin, "npm"), []byte(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) run(extraEnv []string, args ...string) (string, error) {
	out, err := e.command(extraEnv, args...).CombinedOutput()
	return string(out), err
}

// command is the bootstrap run of run, not started: with the fake npm first on
// PATH, the test's own cache dir, and no MODELD_NATIVE_BUILD of the caller's.
func (e *env) command(extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(e.dir, "bootstrap"), append([]string{"--lib-dir", e.libDir}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH"), "XDG_CACHE_HOME="+e.cache, "MODELD_NATIVE_BUILD=")
	cmd.Env = append(cmd.Env, extraEnv...)
	return cmd
}

func (e *env) packed() []string {
	b, _ := os.ReadFile(e.count)
	return strings.Fields(string(b))
}

// leftovers lists staging or old dirs the bootstrap should have removed.
func (e *env) leftovers() []string {
	var out []string
	entries, _ := os.ReadDir(e.libDir)
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), ".staging") || strings.HasPrefix(d.Name(), ".old") {
			out = append(out, d.Name())
		}
	}
	return out
}

func TestBootstrapInstallsThenDoesNothing(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, vulkanPkg}, "")
	out, err := e.run(nil)
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	llama := filepath.Join(e.libDir, "llama")
	for link, target := range map[string]string{"libllama.so": "libllama.v0.4.0.so", "libggml.so": "libggml.v0.4.0.so"} {
		got, err := os.Readlink(filepath.Join(llama, link))
		if err != nil || got != target {
			t.Errorf("%s -> %q (%v), want %s", link, got, err, target)
		}
	}
	for _, f := range []string{"libggml-base.so", "libggml-cpu-x64.so", "../onnxruntime/libonnxruntime.so.1"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(llama, "llama-addon.node")); err == nil {
		t.Error("non-library file extracted")
	}
	if n := len(e.packed()); n != 2 {
		t.Fatalf("packed %d tarballs, want 2", n)
	}

	out, err = e.run(nil)
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if strings.Count(out, "nothing to do") != 2 || len(e.packed()) != 2 {
		t.Fatalf("second run did work:\n%s\npacked: %v", out, e.packed())
	}

	// Adding a GPU backend rebuilds the llama dir with the variant's library only.
	out, err = e.run(nil, "--gpu", "vulkan")
	if err != nil {
		t.Fatalf("--gpu vulkan: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(llama, "libggml-vulkan.so")); err != nil || string(b) != "vulkan" {
		t.Fatalf("libggml-vulkan.so = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(llama, "libggml-base.so")); string(b) != "base" {
		t.Fatalf("the vulkan package's libggml-base.so replaced the CPU one")
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftover dirs: %v", l)
	}
}

func TestBootstrapChecksumMismatchInstallsNothing(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg}, llamaPkg.spec)
	out, err := e.run(nil)
	if err == nil {
		t.Fatalf("bootstrap succeeded with a bad checksum:\n%s", out)
	}
	if !strings.Contains(out, "checksum mismatch for "+llamaPkg.spec) || !strings.Contains(out, "nothing was installed") {
		t.Fatalf("unclear message:\n%s", out)
	}
	for _, d := range []string{"llama", "onnxruntime"} {
		if _, err := os.Stat(filepath.Join(e.libDir, d)); err == nil {
			t.Errorf("%s dir exists after a checksum failure", d)
		}
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftover dirs: %v", l)
	}
	if tb, _ := filepath.Glob(filepath.Join(e.libDir, ".tarballs", "*.tgz")); len(tb) != 0 {
		t.Fatalf("unverified tarball kept: %v", tb)
	}
}

func TestBootstrapInterruptedLeavesNoBrokenDir(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg}, "")
	out, err := e.run([]string{"FAIL_SPEC=" + ortPkg.spec})
	if err == nil {
		t.Fatalf("bootstrap succeeded although npm failed:\n%s", out)
	}
	if !strings.Contains(out, "npm pack "+ortPkg.spec+" failed") {
		t.Fatalf("unclear message:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.libDir, "onnxruntime")); err == nil {
		t.Fatal("half-installed onnxruntime dir")
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftover dirs: %v", l)
	}
	// The next run completes the install, reusing the verified llama tarball.
	out, err = e.run(nil)
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	if !strings.Contains(out, "llama: already installed") {
		t.Fatalf("rerun redid llama:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.libDir, "onnxruntime", "libonnxruntime.so.1")); err != nil {
		t.Fatal(err)
	}
}

func TestBootstrapRejectsUnknownGPU(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg}, "")
	out, err := e.run(nil, "--gpu", "rocm")
	if err == nil || !strings.Contains(out, `unknown --gpu value "rocm"`) {
		t.Fatalf("err = %v\n%s", err, out)
	}
}

// --test-vulkan installs the Vulkan backend alone in llama-vulkan/ and
// leaves llama/ CPU-only; a second run has nothing to do.
func TestBootstrapTestVulkanInstallsApart(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, vulkanPkg}, "")
	out, err := e.run(nil, "--test-vulkan")
	if err != nil {
		t.Fatalf("--test-vulkan: %v\n%s", err, out)
	}
	apart := filepath.Join(e.libDir, "llama-vulkan")
	if b, err := os.ReadFile(filepath.Join(apart, "libggml-vulkan.so")); err != nil || string(b) != "vulkan" {
		t.Fatalf("llama-vulkan/libggml-vulkan.so = %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(apart); len(entries) != 2 { // the library and .installed
		t.Errorf("llama-vulkan holds %d entries, want the library and its stamp", len(entries))
	}
	if _, err := os.Stat(filepath.Join(e.libDir, "llama", "libggml-vulkan.so")); err == nil {
		t.Error("--test-vulkan put the Vulkan backend into llama/")
	}
	out, err = e.run(nil, "--test-vulkan")
	if err != nil || strings.Count(out, "nothing to do") != 3 || len(e.packed()) != 3 {
		t.Fatalf("second run: %v\n%s\npacked: %v", err, out, e.packed())
	}
	// A plain run keeps it.
	if out, err = e.run(nil); err != nil {
		t.Fatalf("plain run: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(apart, "libggml-vulkan.so")); err != nil {
		t.Errorf("a plain run removed llama-vulkan: %v", err)
	}
}
