package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/probe"
)

func TestCPUVariantOfMaps(t *testing.T) {
	const lib = "7f3a1c000000-7f3a1c0a0000 r-xp 00000000 08:01 1234 /home/u/.local/share/modeld/lib/llama/"
	for _, tc := range []struct{ maps, want string }{
		{lib + "libggml-cpu-zen4.so\n" + lib + "libggml-cpu-zen4.so\n" + lib + "libggml-base.so\n", "zen4"},
		{lib + "libggml-cpu-armv8.2_2.so\n", "armv8.2_2"},
		{lib + "libggml-cpu.so\n" + lib + "libllama.so.0.0.1\n", "native"},
		{lib + "libggml-base.so\n", ""},
		{lib + "libggml-cpu-zen4.so\n" + lib + "libggml-cpu-haswell.so\n", ""}, // two kept: cannot tell
		{lib + "libggml-cpu-zen4.so.bak\n", ""},
	} {
		if got := cpuVariantOf(tc.maps); got != tc.want {
			t.Errorf("cpuVariantOf(%q) = %q, want %q", tc.maps, got, tc.want)
		}
	}
}

// `modeld probe`, run as the program it is, names the platform and what
// llama.cpp loaded from the real libraries: the CPU variant ggml kept (one
// of the installed libggml-cpu-<variant>.so) and its CPU device.
func TestProbeNamesPlatformAndVariant(t *testing.T) {
	libs := testenv.LibDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "probe", "--json")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+t.TempDir(), "MODELD_LIB_DIR="+libs, "MODELD_PROBE_TIMEOUT=2m")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	var v struct {
		OS, Arch string
		Library  *probe.Library
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.OS != goruntime.GOOS || v.Arch != goruntime.GOARCH {
		t.Fatalf("platform %s/%s", v.OS, v.Arch)
	}
	if v.Library == nil || v.Library.Error != "" {
		t.Fatalf("library = %+v", v.Library)
	}
	if _, err := os.Stat(filepath.Join(libs, "llama", "libggml-cpu-"+v.Library.CPUVariant+".so")); v.Library.CPUVariant == "" || err != nil {
		t.Fatalf("CPU variant %q is not an installed library (%v)", v.Library.CPUVariant, err)
	}
	cpu := false
	for _, d := range v.Library.Devices {
		cpu = cpu || d.Name == "CPU"
	}
	if !cpu {
		t.Fatalf("no CPU device in %+v", v.Library.Devices)
	}

	cmd = exec.Command(os.Args[0], "-test.run=^$", "--", "probe")
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+t.TempDir(), "MODELD_LIB_DIR="+libs, "MODELD_PROBE_TIMEOUT=2m")
	table, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, table)
	}
	for _, want := range []string{"Platform   " + goruntime.GOOS + "/" + goruntime.GOARCH, "llama.cpp  CPU variant " + v.Library.CPUVariant} {
		if !strings.Contains(string(table), want) {
			t.Errorf("probe table lacks %q:\n%s", want, table)
		}
	}
}
