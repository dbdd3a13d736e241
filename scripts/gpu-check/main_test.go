package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRun(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseRun([]string{"-out", "/o", "-streams", "1, 8", "-layers", "4"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.out != "/o" || !slices.Equal(o.streams, []int{1, 8}) || o.layers != 4 || o.embd != 1024 || o.tokens != 128 || o.timeout != 8*time.Minute {
		t.Errorf("parsed %+v", o)
	}

	// A dry run shrinks what was not given.
	o, err = parseRun([]string{"-out", "/o", "-dry-run", "-tokens", "5"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.embd != 64 || o.layers != 2 || o.tokens != 5 || !slices.Equal(o.streams, []int{1, 2}) {
		t.Errorf("dry run parsed %+v", o)
	}

	t.Setenv("OUT", "/from-env")
	if o, err := parseRun(nil, &stderr); err != nil || o.out != "/from-env" {
		t.Errorf("-out from $OUT: %q, %v", o.out, err)
	}
	t.Setenv("OUT", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-out (or $OUT) is required"},
		{[]string{"-out", "/o", "-streams", "1,x"}, `-streams: "x" is not a positive count`},
		{[]string{"-out", "/o", "-streams", "0"}, `"0" is not a positive count`},
		{[]string{"-out", "/o", "-embd", "100"}, "-embd must be a multiple of 64"},
		{[]string{"-out", "/o", "-tokens", "0"}, "-tokens must be at least 1"},
		{[]string{"-out", "/o", "-timeout", "-1s"}, "-timeout must be positive"},
		{[]string{"-out", "/o", "extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		_, err := parseRun(tc.args, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRun(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestParsePackAndStage(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parsePack([]string{"-out", "b", "-lib-dir", "/l", "-cuda"}, &stderr)
	if err != nil || o.out != "b" || o.libDir != "/l" || !o.cuda {
		t.Errorf("parsePack = %+v, %v", o, err)
	}
	if _, err := parsePack([]string{"x"}, &stderr); err == nil {
		t.Error("parsePack accepted an argument")
	}
	if _, err := parsePack([]string{"-out", ""}, &stderr); err == nil {
		t.Error("parsePack accepted an empty -out")
	}
	if _, err := parseStage(nil, &stderr); err == nil || !strings.Contains(err.Error(), "-part FILE") {
		t.Errorf("parseStage without -part: %v", err)
	}
}

func TestRunDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(nil, &out, &errb); err == nil || !strings.Contains(err.Error(), "usage:") {
		t.Errorf("no command: %v", err)
	}
	if err := run([]string{"fly"}, &out, &errb); err == nil || !strings.Contains(err.Error(), `unknown command "fly"`) {
		t.Errorf("unknown command: %v", err)
	}
	if err := run([]string{"help"}, &out, &errb); err != nil || !strings.Contains(out.String(), "gpu-check run") {
		t.Errorf("help: %v %q", err, out.String())
	}
}

// The NVIDIA Vulkan driver is named only where the loader would not find one.
func TestNvidiaICD(t *testing.T) {
	has := func(paths ...string) func(string) bool {
		return func(p string) bool { return slices.Contains(paths, p) }
	}
	nv := "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"
	if got := nvidiaICD(has(nv)); got != nv {
		t.Errorf("only the container's driver: %q", got)
	}
	if got := nvidiaICD(has(nv, "/usr/share/vulkan/icd.d/nvidia_icd.json")); got != "" {
		t.Errorf("the loader finds one itself: %q", got)
	}
	if got := nvidiaICD(has()); got != "" {
		t.Errorf("none: %q", got)
	}
	env := deviceEnv([]string{"A=1", "LD_LIBRARY_PATH=/mine"}, "/b/sys", has(nv), false)
	want := []string{"A=1", "LD_LIBRARY_PATH=/mine:/b/sys", "MODELD_LOG_FORMAT=json", "VK_DRIVER_FILES=" + nv, "VK_ICD_FILENAMES=" + nv}
	if !slices.Equal(env, want) {
		t.Errorf("deviceEnv = %q, want %q", env, want)
	}
	if env := deviceEnv(nil, "/b/sys", has(nv), true); !slices.Equal(env, []string{"LD_LIBRARY_PATH=/b/sys", "MODELD_LOG_FORMAT=json"}) {
		t.Errorf("dry run deviceEnv = %q", env)
	}
}

func TestVRAMWithin(t *testing.T) {
	for _, tc := range []struct {
		cached, measured int64
		ok               bool
	}{
		{1000, 1000, true}, {1100, 1000, true}, {900, 1000, true},
		{1101, 1000, false}, {899, 1000, false}, {1000, 0, false},
	} {
		if ok, _ := vramWithin(tc.cached, tc.measured); ok != tc.ok {
			t.Errorf("vramWithin(%d, %d) = %v", tc.cached, tc.measured, ok)
		}
	}
	rep := &report{}
	checkVRAM(rep, sysInfo{}, 0, 0, errors.New("nvidia-smi: not found"))
	if it := rep.Items[0]; it.Status != notRun || !strings.Contains(it.Detail, "no NVML reading") {
		t.Errorf("without NVML: %+v", it)
	}
}

func TestCheckGreedy(t *testing.T) {
	rep := &report{}
	a := completion{text: "ab c", chunks: []string{"a", "b", " c"}, tokens: 3}
	checkGreedy(rep, a, a)
	b := completion{text: "ab d", chunks: []string{"a", "b", " d"}, tokens: 3}
	checkGreedy(rep, a, b)
	if rep.Items[0].Status != passed || rep.Items[1].Status != failed || !strings.Contains(rep.Items[1].Detail, "the first 2 of 3") {
		t.Errorf("items %+v", rep.Items)
	}
	md := renderMarkdown(rep)
	if !strings.Contains(md, "| greedy output equals the CPU run | failed |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// pack -cuda's parts, staged one call at a time, give back the library;
// a part that does not match its manifest is refused.
func TestCUDAPartsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libggml-cuda.so")
	data := make([]byte, 1<<20)
	if _, err := rand.Read(data[:1<<19]); err != nil { // half random, half zeros
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, data, 0o644); err != nil {
		t.Fatal(err)
	}
	parts := filepath.Join(dir, "cuda")
	var out bytes.Buffer
	if err := packCUDA(lib, parts, &out); err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(dir, "stage")
	if _, err := unstageCUDA(stage, dir); err == nil {
		t.Fatal("unstaged with nothing staged")
	}
	if err := stageCUDA(stageOptions{part: filepath.Join(parts, "part-0"), stage: stage}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 of 1 parts there") {
		t.Errorf("stage-cuda said %q", out.String())
	}
	got, err := unstageCUDA(stage, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("unstaged library differs (%v)", err)
	}

	if err := os.WriteFile(filepath.Join(parts, "part-0"), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := stageCUDA(stageOptions{part: filepath.Join(parts, "part-0"), stage: stage}, &out); err == nil || !strings.Contains(err.Error(), "the manifest says") {
		t.Errorf("a tampered part: %v", err)
	}
}

func TestExcludeFromGit(t *testing.T) {
	t.Chdir(t.TempDir())
	for range 2 {
		if err := excludeFromGit(".gpu-check"); err != nil {
			t.Fatal(err)
		}
	}
	if err := excludeFromGit(filepath.Join(os.TempDir(), "elsewhere")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(".git", "info", "exclude"))
	if err != nil || string(b) != "/.gpu-check/\n" {
		t.Errorf("exclude = %q, %v; want the bundle folder once", b, err)
	}
}
