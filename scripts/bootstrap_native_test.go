package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLlamaSource is a CMake project in the shape of llama.cpp's build
// outputs: the four shared libraries (into build/bin, as llama.cpp puts
// them, each linking the next as llama.cpp's do, each from a source of its
// own, src_<name>.c, so that a test can tell which were compiled) and
// llama-server when LLAMA_BUILD_SERVER is on. It records the options it was configured with in
// a file next to the libraries.
var fakeLlamaSource = map[string]string{
	"CMakeLists.txt": `cmake_minimum_required(VERSION 3.14)
project(fakellama C)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
foreach(lib ggml-base ggml-cpu ggml llama)
  add_library(${lib} SHARED src_${lib}.c)
endforeach()
target_link_libraries(ggml-cpu ggml-base)
target_link_libraries(ggml ggml-cpu ggml-base)
target_link_libraries(llama ggml)
file(WRITE ${CMAKE_BINARY_DIR}/bin/libconfigured.so.txt "native=${GGML_NATIVE} openmp=${GGML_OPENMP}\n")
if(LLAMA_BUILD_SERVER)
  add_executable(llama-server server.c)
  target_link_libraries(llama-server llama)
endif()
if(LLAMA_BUILD_MTMD)
  add_library(mtmd SHARED src_mtmd.c)
  target_link_libraries(mtmd llama)
endif()
`,
	"src_ggml-base.c": "int fake_llama(void) { return 1; }\n",
	"src_ggml-cpu.c":  "int fake_llama(void) { return 1; }\n",
	"src_ggml.c":      "int fake_llama(void) { return 1; }\n",
	"src_llama.c":     "int fake_llama(void) { return 1; }\n",
	"src_mtmd.c":      "int fake_llama(void) { return 1; }\n",
	"server.c":        "int main(void) { return 0; }\n",
}

// fakeNodeLlamaCpp is node-llama-cpp's tarball with a git bundle of
// fakeLlamaSource where the real one has llama.cpp's.
func fakeNodeLlamaCpp(t *testing.T) fakePkg {
	t.Helper()
	for _, tool := range []string{"cmake", "git", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the native-build test needs %s: apt-get install cmake git gcc", tool)
		}
	}
	repo := t.TempDir()
	for name, body := range fakeLlamaSource {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("commit", "-q", "-m", "fake llama.cpp")
	git("bundle", "create", "-q", "release.bundle", "HEAD", "main")
	bundle, err := os.ReadFile(filepath.Join(repo, "release.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return fakePkg{"node-llama-cpp@3.21.1", map[string]string{
		"package/package.json":            "{}",
		"package/llama/gitRelease.bundle": string(bundle),
	}}
}

// --native builds the libraries (and with --with-server llama-server) from
// the bundle in the pinned node-llama-cpp tarball, for this CPU with OpenMP,
// into llama/ through the staging dir; later plain runs keep the native
// build; --prebuilt goes back; the combinations that cannot work are
// refused before anything is fetched.
func TestBootstrapNativeBuildsFromTheBundle(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, vulkanPkg, fakeNodeLlamaCpp(t)}, "")
	for _, bad := range [][]string{{"--native", "--gpu", "vulkan"}, {"--with-server"}, {"--native", "--prebuilt"}} {
		out, err := e.run(nil, bad...)
		if err == nil || len(e.packed()) != 0 {
			t.Fatalf("%v: err %v, packed %v\n%s", bad, err, e.packed(), out)
		}
	}
	out, err := e.run(nil, "--native", "--with-server")
	if err != nil {
		t.Fatalf("--native: %v\n%s", err, out)
	}
	if !progressLine.MatchString(out) || !strings.Contains(out, "compiling, 100 % after") {
		t.Errorf("no progress lines:\n%s", out)
	}
	if trees, _ := filepath.Glob(filepath.Join(e.cache, "modeld", "native-build", "*", "build")); len(trees) != 0 {
		t.Errorf("build trees kept after the install: %v", trees)
	}
	llama := filepath.Join(e.libDir, "llama")
	for _, f := range []string{"libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so", "bin/llama-server"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err != nil {
			t.Errorf("native build: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu-x64.so")); err == nil {
		t.Error("the prebuilt CPU variants are in the native build's dir")
	}
	if b, err := os.ReadFile(filepath.Join(llama, "libconfigured.so.txt")); err != nil || string(b) != "native=ON openmp=ON\n" {
		t.Errorf("configured with %q (%v), want GGML_NATIVE and GGML_OPENMP on", b, err)
	}
	stamp, _ := os.ReadFile(filepath.Join(llama, ".installed"))
	if !strings.Contains(string(stamp), "node-llama-cpp@3.21.1 native cpu-") || !strings.Contains(string(stamp), "llama-server") {
		t.Errorf(".installed = %q", stamp)
	}
	if entries, _ := os.ReadDir(llama); len(entries) == 0 {
		t.Fatal("empty llama dir")
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftover dirs: %v", l)
	}

	// make run and make test call the plain bootstrap: it keeps the build.
	out, err = e.run(nil)
	if err != nil || !strings.Contains(out, "the native build is installed") {
		t.Fatalf("plain run after --native: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu.so")); err != nil {
		t.Fatalf("a plain run replaced the native build: %v", err)
	}
	out, err = e.run(nil, "--prebuilt")
	if err != nil {
		t.Fatalf("--prebuilt: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu-x64.so")); err != nil {
		t.Fatalf("--prebuilt did not install the prebuilt libraries: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libggml-cpu.so")); err == nil {
		t.Fatal("--prebuilt kept the native build's libraries")
	}
}

// --with-mtmd adds llama.cpp's multimodal library, which the prebuilt package
// lacks: on the prebuilt path it is built alone from the same bundle and only
// libmtmd.so joins the prebuilt libraries; with --native it comes from the
// same build, and a plain run keeps that build.
func TestBootstrapWithMtmd(t *testing.T) {
	e := newEnv(t, []fakePkg{llamaPkg, ortPkg, fakeNodeLlamaCpp(t)}, "")
	out, err := e.run(nil, "--with-mtmd")
	if err != nil {
		t.Fatalf("--with-mtmd: %v\n%s", err, out)
	}
	if !strings.Contains(out, "compiling mtmd") || !strings.Contains(out, "libmtmd.so built") {
		t.Errorf("no progress lines:\n%s", out)
	}
	llama := filepath.Join(e.libDir, "llama")
	for _, f := range []string{"libmtmd.so", "libllama.v0.4.0.so", "libggml-cpu-x64.so", "libllama.so"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err != nil {
			t.Errorf("prebuilt + mtmd: %v", err)
		}
	}
	for _, f := range []string{"libggml-cpu.so", "libconfigured.so.txt"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err == nil {
			t.Errorf("the source build's %s is in the prebuilt dir", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(llama, "libllama.so")); string(b) != "llama" {
		t.Errorf("libllama.so is %q, not the prebuilt library", b)
	}
	stamp, _ := os.ReadFile(filepath.Join(llama, ".installed"))
	if !strings.Contains(string(stamp), "@node-llama-cpp/linux-x64@3.21.1 + mtmd") {
		t.Errorf(".installed = %q", stamp)
	}
	if l := e.leftovers(); len(l) > 0 {
		t.Fatalf("leftover dirs: %v", l)
	}
	out, err = e.run(nil, "--with-mtmd")
	if err != nil || !strings.Contains(out, "nothing to do") {
		t.Fatalf("second --with-mtmd run: %v\n%s", err, out)
	}
	// A plain run (make run's bootstrap) keeps the library.
	out, err = e.run(nil)
	if err != nil || !strings.Contains(out, "keeping the multimodal library") || !strings.Contains(out, "nothing to do") {
		t.Fatalf("plain run after --with-mtmd: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libmtmd.so")); err != nil {
		t.Fatalf("a plain run dropped the multimodal library: %v", err)
	}

	out, err = e.run(nil, "--native", "--with-mtmd")
	if err != nil {
		t.Fatalf("--native --with-mtmd: %v\n%s", err, out)
	}
	for _, f := range []string{"libmtmd.so", "libggml-cpu.so"} {
		if _, err := os.Stat(filepath.Join(llama, f)); err != nil {
			t.Errorf("native + mtmd: %v", err)
		}
	}
	out, err = e.run(nil)
	if err != nil || !strings.Contains(out, "the native build is installed") {
		t.Fatalf("plain run after --native --with-mtmd: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(llama, "libmtmd.so")); err != nil {
		t.Fatalf("a plain run dropped the native build's mtmd: %v", err)
	}
}
