package scripts_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangGuard bounds a wait on a build that should have got somewhere: past it
// the test fails with the build's log rather than hanging. It times nothing.
const hangGuard = 10 * time.Minute

// progressLine is what the bootstrap prints while cmake compiles.
var progressLine = regexp.MustCompile(`compiling, [0-9]+ % after [0-9]+m[0-9]{2}s`)

// gate is a C compiler in front of cc for the fake llama.cpp: it records each
// source it compiles and, while armed, stops before src_llama.c (the last
// library, compiled once the other three are linked): it says so on a fifo and
// goes on when the test releases it, or is killed there.
type gate struct {
	cc, compiled, reached, release, armed string
	pgid                                  string // file: the process group of the compile that reached the gate
}

func newGate(t *testing.T) *gate {
	t.Helper()
	dir := t.TempDir()
	g := &gate{cc: filepath.Join(dir, "cc"), compiled: filepath.Join(dir, "compiled.log"),
		reached: filepath.Join(dir, "reached"), release: filepath.Join(dir, "release"), armed: filepath.Join(dir, "armed"),
		pgid: filepath.Join(dir, "pgid")}
	for _, f := range []string{g.reached, g.release} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `#!/bin/sh
gated=0
for a in "$@"; do
	case "$a" in *.c) echo "${a##*/}" >>"` + g.compiled + `" ;; esac
	case "$a" in */src_llama.c) gated=1 ;; esac
done
if [ $gated = 1 ] && [ -e "` + g.armed + `" ]; then
	ps -o pgid= -p $$ | tr -d ' ' >"` + g.pgid + `"
	echo reached >"` + g.reached + `"
	cat "` + g.release + `" >/dev/null
fi
exec cc "$@"
`
	if err := os.WriteFile(g.cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A test that fails with a build at the gate lets it go on to its end.
	t.Cleanup(func() {
		os.Remove(g.armed)
		if f, err := os.OpenFile(g.release, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return g
}

func (g *gate) arm(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(g.armed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (g *gate) disarm(t *testing.T) {
	t.Helper()
	if err := os.Remove(g.armed); err != nil {
		t.Fatal(err)
	}
}

// sources lists the sources compiled so far, in order.
func (g *gate) sources() []string {
	b, _ := os.ReadFile(g.compiled)
	return strings.Fields(string(b))
}

// waitReached returns once a build stands at the gate; it fails the test when
// the build ends first (exited) or gets nowhere.
func (g *gate) waitReached(t *testing.T, exited <-chan error, log func() string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		f, err := os.Open(g.reached) // blocks until the compiler opens it to write
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-exited:
		t.Fatalf("the build ended before reaching src_llama.c: %v\n%s", err, log())
	case <-time.After(hangGuard):
		t.Fatalf("the build did not reach src_llama.c:\n%s", log())
	}
}

// open lets the build at the gate go on.
func (g *gate) open(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(g.release, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// nativeTree is the build tree of the native build in e's cache, and its lock.
func (e *env) nativeTree(t *testing.T) (tree, lock string) {
	t.Helper()
	trees, _ := filepath.Glob(filepath.Join(e.cache, "modeld", "native-build", "node-llama-cpp-3.21.1-cpu-*.lock"))
	if len(trees) != 1 {
		t.Fatalf("native build locks in the cache: %v, want one", trees)
	}
	return strings.TrimSuffix(trees[0], ".lock"), trees[0]
}

// waitUnlocked returns once no build holds lock.
func waitUnlocked(t *testing.T, lock string, log func() string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(lock, os.O_RDWR, 0)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("the background build still holds %s:\n%s", lock, log())
	}
}

// status reads the native build's status file: nil when there is none.
func (e *env) status(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.libDir, ".native-build", "status"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		st[k] = v
	}
	return st
}

func (e *env) buildLog() string {
	b, _ := os.ReadFile(filepath.Join(e.libDir, ".native-build", "build.log"))
	return string(b)
}

func fileText(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// niceness is the nice value of process pid (Linux /proc).
func niceness(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:]) // field 3 (state) on
	n, err := strconv.Atoi(fields[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// assertNative checks that llama/ holds a finished native build, and that the
// build left nothing behind: no tree, no status, no staging dirs.
func (e *env) assertNative(t *testing.T, tree string) {
	t.Helper()
	llama := filepath.Join(e.libDir, "llama")
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu.so")); err != nil {
		t.Errorf("no native build in llama/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu-x64.so")); err == nil {
		t.Error("the prebuilt libraries are still in llama/")
	}
	if stamp := fileText(filepath.Join(llama, ".installed")); !strings.Contains(stamp, "node-llama-cpp@3.21.1 native cpu-") {
		t.Errorf(".installed = %q", stamp)
	}
	if _, err := os.Stat(tree); err == nil {
		t.Errorf("the build tree %s is kept after the install", tree)
	}
	if st := e.status(t); st != nil {
		t.Errorf("a status file is left after the install: %v", st)
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Errorf("leftover dirs: %v", l)
	}
}

// A native build that is stopped (kill PID: the compile stops with it) goes on
// at the next run where it stopped: what was compiled is not compiled again;
// the stopped run installed nothing, and its status says it stopped. Both
// runs print the compile's progress.
func TestBootstrapNativeResumesAStoppedBuild(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, fakeNodeLlamaCpp(t)}, "")
	g := newGate(t)
	g.arm(t)
	cc := []string{"CC=" + g.cc}
	outPath := filepath.Join(t.TempDir(), "out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd := e.command(cc, "--native")
	cmd.Stdout, cmd.Stderr = outFile, outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	g.waitReached(t, exited, func() string { return fileText(outPath) + e.buildLog() })
	st := e.status(t)
	if st["state"] != "running" || st["pid"] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("status while compiling: %v, want running, pid %d", st, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Error("the stopped run exited 0")
	}
	_, lock := e.nativeTree(t)
	waitUnlocked(t, lock, e.buildLog) // the compile has ended too
	if st := e.status(t); st["state"] != "stopped" {
		t.Errorf("status after the stop: %v", st)
	}
	first := fileText(outPath)
	if !progressLine.MatchString(first) {
		t.Errorf("no progress line from the stopped run:\n%s", first)
	}
	done := g.sources()
	for _, src := range []string{"src_ggml-base.c", "src_ggml-cpu.c", "src_ggml.c", "src_llama.c"} {
		if !slices.Contains(done, src) {
			t.Fatalf("the stopped run did not get to %s: compiled %v", src, done)
		}
	}
	if _, err := os.Stat(filepath.Join(e.libDir, "llama")); err == nil {
		t.Fatal("a stopped build installed llama/")
	}
	tree, _ := e.nativeTree(t)
	if _, err := os.Stat(filepath.Join(tree, "build", "CMakeCache.txt")); err != nil {
		t.Fatalf("the stopped build's tree is gone: %v", err)
	}

	g.disarm(t)
	out, err := e.run(cc, "--native")
	if err != nil {
		t.Fatalf("second --native: %v\n%s", err, out)
	}
	if !strings.Contains(out, "going on with the build an earlier run stopped") {
		t.Errorf("the second run does not say it goes on:\n%s", out)
	}
	if !strings.Contains(out, "compiling, 100 % after") {
		t.Errorf("no 100 %% line:\n%s", out)
	}
	again := g.sources()[len(done):]
	if !slices.Contains(again, "src_llama.c") {
		t.Errorf("the second run did not compile what was left (src_llama.c): %v", again)
	}
	for _, src := range []string{"src_ggml-base.c", "src_ggml-cpu.c", "src_ggml.c"} {
		if slices.Contains(again, src) {
			t.Errorf("the second run compiled %s again: %v", src, again)
		}
	}
	e.assertNative(t, tree)
}

// A build killed outright with its compile (as by a reboot) leaves its
// status as it was, with a pid that is gone (which the daemon reads as
// stopped). A tree whose objects such a kill left broken (a truncated object
// file looks up to date) is built once more from clean instead of failing for
// good.
func TestBootstrapNativeRebuildsABrokenTree(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, fakeNodeLlamaCpp(t)}, "")
	g := newGate(t)
	g.arm(t)
	cc := []string{"CC=" + g.cc}
	cmd := e.command(cc, "--native")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	g.waitReached(t, exited, e.buildLog)
	build, err := strconv.Atoi(strings.TrimSpace(fileText(g.pgid)))
	if err != nil || build == cmd.Process.Pid {
		t.Fatalf("the compile's process group: %q (%v), want one of its own", fileText(g.pgid), err)
	}
	for _, group := range []int{cmd.Process.Pid, build} {
		if err := syscall.Kill(-group, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	<-exited
	tree, lock := e.nativeTree(t)
	waitUnlocked(t, lock, e.buildLog)
	if st := e.status(t); st["state"] != "running" || st["pid"] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("status after a kill: %v", st)
	}
	objs, _ := filepath.Glob(filepath.Join(tree, "build", "CMakeFiles", "ggml.dir", "src_ggml.c.o"))
	if len(objs) != 1 {
		t.Fatalf("no object of src_ggml.c in the tree")
	}
	if err := os.WriteFile(objs[0], []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.disarm(t)
	out, err := e.run(cc, "--native")
	if err != nil {
		t.Fatalf("--native over a broken tree: %v\n%s", err, out)
	}
	if !strings.Contains(out, "building again from a clean tree") {
		t.Errorf("no word of the clean rebuild:\n%s", out)
	}
	e.assertNative(t, tree)
}

// make run's --native-background installs the prebuilt libraries (here with
// the multimodal library), starts the native build detached at the lowest
// priority and returns while it compiles; the lock turns a second build away;
// when the build ends it replaces llama/ whole, keeping mtmd.
func TestBootstrapNativeBackground(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, fakeNodeLlamaCpp(t)}, "")
	if out, err := e.run(nil, "--with-mtmd"); err != nil {
		t.Fatalf("--with-mtmd: %v\n%s", err, out)
	}
	g := newGate(t)
	g.arm(t)
	cc := []string{"CC=" + g.cc}
	// The build stops at the gate until it is opened: had the run waited for
	// it, it would not return.
	out, err := e.run(cc, "--native-background")
	if err != nil || !strings.Contains(out, "building llama.cpp for this CPU in the background") {
		t.Fatalf("--native-background: %v\n%s", err, out)
	}
	llama := filepath.Join(e.libDir, "llama")
	for _, f := range []string{"libggml-cpu-x64.so", "libmtmd.so"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err != nil {
			t.Fatalf("the prebuilt libraries are not in place while the build runs: %v", err)
		}
	}
	g.waitReached(t, nil, e.buildLog)
	st := e.status(t)
	if st["state"] != "running" || st["log"] != filepath.Join(e.libDir, ".native-build", "build.log") {
		t.Errorf("status while compiling: %v", st)
	}
	if n := niceness(t, st["pid"]); n != 19 {
		t.Errorf("the background build runs at nice %d, want 19", n)
	}

	// Disarmed, a second build that the lock let through would run to its end
	// (and fail the test) rather than wait at the gate.
	g.disarm(t)
	out, err = e.run(cc, "--native-background")
	if err != nil || !strings.Contains(out, "a native build is already running (pid "+st["pid"]) || strings.Contains(out, "in the background") {
		t.Errorf("second --native-background while one runs: %v\n%s", err, out)
	}
	out, err = e.run(cc, "--native")
	if err == nil || !strings.Contains(out, "already running") || strings.Contains(out, "configuring") {
		t.Errorf("--native while a background build runs: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu-x64.so")); err != nil {
		t.Fatalf("a refused run changed llama/: %v", err)
	}

	tree, lock := e.nativeTree(t)
	g.open(t)
	waitUnlocked(t, lock, e.buildLog)
	e.assertNative(t, tree)
	if _, err := os.Stat(filepath.Join(llama, "libmtmd.so")); err != nil {
		t.Errorf("the native build dropped the multimodal library: %v", err)
	}
	if stamp := fileText(filepath.Join(llama, ".installed")); !strings.Contains(stamp, "+ mtmd") {
		t.Errorf(".installed = %q, want + mtmd", stamp)
	}
	log := e.buildLog()
	if !progressLine.MatchString(log) || !strings.Contains(log, "llama: installed node-llama-cpp@3.21.1 native") {
		t.Errorf("the build log lacks progress or the install:\n%s", log)
	}
	// make run again: the native build is there, nothing starts.
	out, err = e.run(cc, "--native-background")
	if err != nil || !strings.Contains(out, "the native build is installed") || strings.Contains(out, "in the background") {
		t.Errorf("--native-background over the native build: %v\n%s", err, out)
	}
}

// A background build whose llama/ was changed while it compiled (here to a GPU
// install) leaves it as it is.
func TestBootstrapNativeBackgroundYieldsToAChangedInstall(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, vulkanPkg, fakeNodeLlamaCpp(t)}, "")
	g := newGate(t)
	g.arm(t)
	cc := []string{"CC=" + g.cc}
	if out, err := e.run(cc, "--native-background"); err != nil {
		t.Fatalf("--native-background: %v\n%s", err, out)
	}
	g.waitReached(t, nil, e.buildLog)
	if out, err := e.run(nil, "--gpu", "vulkan"); err != nil {
		t.Fatalf("--gpu vulkan while the build runs: %v\n%s", err, out)
	}
	_, lock := e.nativeTree(t)
	g.open(t)
	waitUnlocked(t, lock, e.buildLog)
	llama := filepath.Join(e.libDir, "llama")
	if _, err := os.Stat(filepath.Join(llama, "libggml-vulkan.so")); err != nil {
		t.Errorf("the background build replaced the GPU install: %v", err)
	}
	if !strings.Contains(e.buildLog(), "changed while the build ran") {
		t.Errorf("the log does not say why nothing was installed:\n%s", e.buildLog())
	}
	if st := e.status(t); st != nil {
		t.Errorf("status after a build that installed nothing: %v", st)
	}
}

// pathWithout is a PATH of one dir with links to every program on PATH but
// the named ones.
func pathWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, en := range entries {
			link := filepath.Join(dir, en.Name())
			if slices.Contains(names, en.Name()) {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue
			}
			if err := os.Symlink(filepath.Join(d, en.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// --native-background starts nothing without a C++ compiler (one line says how
// to get the faster build), with MODELD_NATIVE_BUILD=0, or over GPU libraries;
// the prebuilt install is made all the same. A bad MODELD_NATIVE_BUILD is an
// error.
func TestBootstrapNativeBackgroundStartsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(e *env) []string
		args []string
		says string
	}{
		{"no compiler", func(e *env) []string { return []string{"PATH=" + e.bin + ":" + pathWithout(t, "c++", "g++")} }, nil,
			"with cmake, git and g++ installed (Debian: apt-get install cmake git g++) the next run builds it in the background"},
		{"turned off", func(*env) []string { return []string{"MODELD_NATIVE_BUILD=0"} }, nil, "no background native build (MODELD_NATIVE_BUILD=0)"},
		{"GPU libraries", func(*env) []string { return nil }, []string{"--gpu", "vulkan"}, "no background native build: it is CPU-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []fakePkg{llamaPkg, ortPkg, vulkanPkg, fakeNodeLlamaCpp(t)}, "")
			out, err := e.run(tc.env(e), append(tc.args, "--native-background")...)
			if err != nil || !strings.Contains(out, tc.says) {
				t.Fatalf("%v\n%s", err, out)
			}
			if strings.Contains(out, "in the background at") {
				t.Errorf("a build was started:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(e.cache, "modeld")); err == nil {
				t.Errorf("the cache holds a build tree")
			}
			if _, err := os.Stat(filepath.Join(e.libDir, ".native-build")); err == nil {
				t.Errorf("a build log or status was written")
			}
			if _, err := os.Stat(filepath.Join(e.libDir, "llama", "libggml-cpu-x64.so")); err != nil {
				t.Errorf("the prebuilt libraries are not installed: %v", err)
			}
		})
	}
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg}, "")
	out, err := e.run([]string{"MODELD_NATIVE_BUILD=yes"}, "--native-background")
	if err == nil || !strings.Contains(out, "MODELD_NATIVE_BUILD=yes: want 0") || len(e.packed()) != 0 {
		t.Errorf("a bad MODELD_NATIVE_BUILD: %v\n%s", err, out)
	}
}
