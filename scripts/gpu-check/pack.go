package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The most a bundle may weigh: a call carries 64 MiB with the working tree
// (about 14 MiB), and what is left is headroom.
const (
	maxBundle   = 44 << 20
	maxCUDAPart = 40 << 20
)

// manifest lists a bundle's or a CUDA part set's files with their checksums.
type manifest struct {
	Commit string            `json:"commit,omitempty"`
	Files  map[string]string `json:"files"`           // path -> sha256
	Parts  []string          `json:"parts,omitempty"` // CUDA: the part files in order
	Lib    string            `json:"lib,omitempty"`   // CUDA: the library's sha256
}

func defaultLibDir() string {
	if d := os.Getenv("MODELD_LIB_DIR"); d != "" {
		return d
	}
	if h := os.Getenv("MODELD_HOME"); h != "" {
		return filepath.Join(h, "lib")
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "modeld", "lib")
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".local", "share", "modeld", "lib")
}

func dirOf(p string) string { return filepath.Dir(p) }

// parseCounts reads a comma list of positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// sysLibDirs are where Debian and Ubuntu keep the system's shared libraries.
var sysLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"}

// bundleSysLibs go with the bundle for a machine that lacks them; run puts
// them last on the library path, so the machine's own come first.
var bundleSysLibs = []string{"libvulkan.so.1", "libffi.so.8"}

func pack(o packOptions, stdout io.Writer) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("pack: run it from the repository root")
	}
	stage, err := os.MkdirTemp("", "gpu-check-pack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)

	for _, b := range []struct{ out, pkg string }{{"modeld", "./cmd/modeld"}, {"gpu-check", "./scripts/gpu-check"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(stage, b.out), b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pack: go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	if err := copyLlama(filepath.Join(o.libDir, "llama"), filepath.Join(stage, "lib", "llama")); err != nil {
		return err
	}
	vk := filepath.Join(o.libDir, "llama-vulkan", "libggml-vulkan.so")
	if _, err := os.Stat(vk); err != nil {
		vk = filepath.Join(o.libDir, "llama", "libggml-vulkan.so")
	}
	if err := copyFile(vk, filepath.Join(stage, "vulkan", "libggml-vulkan.so")); err != nil {
		return fmt.Errorf("pack: the ggml Vulkan backend (run scripts/bootstrap --test-vulkan): %w", err)
	}
	for _, name := range bundleSysLibs {
		src, err := findSysLib(name)
		if err != nil {
			return err
		}
		if err := copyFile(src, filepath.Join(stage, "sys", name)); err != nil {
			return err
		}
	}
	m := manifest{Files: map[string]string{}}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if err := filepath.Walk(stage, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		sum, err := fileSHA256(p)
		rel, _ := filepath.Rel(stage, p)
		m.Files[rel] = sum
		return err
	}); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(stage, "manifest.json"), m); err != nil {
		return err
	}

	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	bundle := filepath.Join(o.out, "bundle.tar.xz")
	if err := xzTar(stage, bundle); err != nil {
		return err
	}
	st, err := os.Stat(bundle)
	if err != nil {
		return err
	}
	if st.Size() > maxBundle {
		return fmt.Errorf("pack: %s is %.1f MiB, over the %d MiB a call can carry beside the working tree", bundle, mibf(st.Size()), maxBundle>>20)
	}
	if err := excludeFromGit(o.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%.1f MiB, %d files, commit %s)\n", bundle, mibf(st.Size()), len(m.Files), m.Commit)
	if o.cuda {
		if err := packCUDA(filepath.Join(o.libDir, "llama", "libggml-cuda.so"), filepath.Join(o.out, "cuda"), stdout); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "on the GPU machine, with %s carried:\n  %s\n", o.out, deviceCommand(o.out))
	return nil
}

// deviceCommand is the one line that unpacks and runs the bundle there.
func deviceCommand(out string) string {
	return fmt.Sprintf(`python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' %s/bundle.tar.xz /tmp/gc && /tmp/gc/gpu-check run -bundle /tmp/gc -out "$OUT"`, out)
}

// copyLlama copies the llama.cpp libraries, keeping the libllama.so and
// libggml.so links, and leaves out any GPU backend (run adds the one it uses).
func copyLlama(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("pack: the llama.cpp libraries (run scripts/bootstrap): %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if name == "libggml-vulkan.so" || name == "libggml-cuda.so" {
			continue
		}
		p := filepath.Join(src, name)
		if target, err := os.Readlink(p); err == nil {
			if err := os.Symlink(target, filepath.Join(dst, name)); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(p, filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

func findSysLib(name string) (string, error) {
	for _, d := range sysLibDirs {
		p := filepath.Join(d, name)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, nil
		}
	}
	return "", fmt.Errorf("pack: %s not found in %s (Debian: apt-get install libvulkan1 libffi8)", name, strings.Join(sysLibDirs, ", "))
}

func xzTar(dir, dst string) error {
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tarCmd := exec.Command("tar", "-C", dir, "-cf", "-", ".")
	xz := exec.Command("xz", "-T0", "-6", "-c")
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		f.Close()
		return err
	}
	var tarErr, xzErr bytes.Buffer
	tarCmd.Stderr, xz.Stdin, xz.Stdout, xz.Stderr = &tarErr, pipe, f, &xzErr
	if err := xz.Start(); err != nil {
		f.Close()
		return fmt.Errorf("pack: xz (Debian: apt-get install xz-utils): %w", err)
	}
	terr := tarCmd.Run()
	xerr := xz.Wait()
	cerr := f.Close()
	if err := errors.Join(terr, xerr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pack: tar | xz: %w %s %s", err, tarErr.String(), xzErr.String())
	}
	return os.Rename(tmp, dst)
}

// packCUDA compresses the CUDA backend and cuts it into parts that fit a
// call each, with a manifest that stage-cuda and run check them against.
func packCUDA(lib, dir string, stdout io.Writer) error {
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("pack -cuda: the ggml CUDA backend (scripts/bootstrap --gpu cuda puts it in llama/): %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	libSum, err := fileSHA256(lib)
	if err != nil {
		return err
	}
	xz := exec.Command("xz", "-T0", "-9e", "-c", lib)
	data, err := xz.Output()
	if err != nil {
		return fmt.Errorf("pack -cuda: xz: %w", err)
	}
	m := manifest{Files: map[string]string{}, Lib: libSum}
	for i := 0; len(data) > 0; i++ {
		n := min(len(data), maxCUDAPart)
		name := fmt.Sprintf("part-%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), data[:n], 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(data[:n])
		m.Files[name] = hex.EncodeToString(sum[:])
		m.Parts = append(m.Parts, name)
		data = data[n:]
	}
	if err := writeJSON(filepath.Join(dir, "manifest.json"), m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d parts of the CUDA backend to %s; carry each with %s/manifest.json in a call of its own and run there:\n", len(m.Parts), dir, dir)
	for _, p := range m.Parts {
		fmt.Fprintf(stdout, "  /tmp/gc/gpu-check stage-cuda -part %s/%s   (or: go-less, the bundle's gpu-check after unpacking)\n", dir, p)
	}
	return nil
}

// stageCUDA keeps one carried part, checked against its manifest, in the
// stage folder outside the repository, where the next calls find it.
func stageCUDA(o stageOptions, stdout io.Writer) error {
	var m manifest
	if err := readJSON(filepath.Join(filepath.Dir(o.part), "manifest.json"), &m); err != nil {
		return fmt.Errorf("stage-cuda: %w (carry the manifest with the part)", err)
	}
	name := filepath.Base(o.part)
	want, ok := m.Files[name]
	if !ok {
		return fmt.Errorf("stage-cuda: %s is not in the manifest", name)
	}
	got, err := fileSHA256(o.part)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("stage-cuda: %s has sha256 %s, the manifest says %s", name, got, want)
	}
	if err := os.MkdirAll(o.stage, 0o755); err != nil {
		return err
	}
	if err := copyFile(o.part, filepath.Join(o.stage, name)); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(o.stage, "manifest.json"), m); err != nil {
		return err
	}
	have := stagedParts(o.stage, m)
	fmt.Fprintf(stdout, "staged %s in %s: %d of %d parts there\n", name, o.stage, len(have), len(m.Parts))
	return nil
}

// stagedParts lists the parts of m in stage whose checksums match.
func stagedParts(stage string, m manifest) []string {
	var have []string
	for _, p := range m.Parts {
		if sum, err := fileSHA256(filepath.Join(stage, p)); err == nil && sum == m.Files[p] {
			have = append(have, p)
		}
	}
	sort.Strings(have)
	return have
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// excludeFromGit adds dir to the repository's .git/info/exclude, so the
// bundle is an ignored path that a call carries by name.
func excludeFromGit(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil // outside the repository: nothing to ignore
	}
	line := "/" + filepath.ToSlash(rel) + "/"
	p := filepath.Join(".git", "info", "exclude")
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		line = "\n" + line
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

func mibf(n int64) float64 { return float64(n) / (1 << 20) }
