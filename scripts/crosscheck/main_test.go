package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The test binary itself is a host executable: it passes as its own platform
// and fails, saying why, as each cross target.
func TestCheckTellsPlatformsApart(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	// The other Linux target, and how the host's own machine is named.
	cases := map[string]struct{ other, machine string }{
		"linux/amd64": {"linux/arm64", "EM_X86_64"},
		"linux/arm64": {"linux/amd64", "EM_AARCH64"},
	}
	other, wrong := cases[host].other, cases[host].machine
	if other == "" {
		t.Fatalf("this test reads a Linux test binary; host is %s", host)
	}
	if _, err := check("darwin/arm64", self); err == nil || !strings.Contains(err.Error(), "not a Mach-O") {
		t.Errorf("darwin/arm64 check of an ELF file: %v", err)
	}
	if _, err := check(other, self); err == nil || !strings.Contains(err.Error(), "built for "+wrong) {
		t.Errorf("%s check of a %s binary: %v", other, host, err)
	}
	if _, err := check("plan9/mips", self); err == nil || !strings.Contains(err.Error(), "unknown platform") {
		t.Errorf("unknown platform: %v", err)
	}
	if err := only([]string{"libc.so.6", "libonnxruntime.so.1"}, glibcLibs); err == nil || !strings.Contains(err.Error(), "libonnxruntime.so.1") {
		t.Errorf("a linked runtime library passed: %v", err)
	}
}

func TestWithoutNVML(t *testing.T) {
	bi := &debug.BuildInfo{Deps: []*debug.Module{{Path: "github.com/yalue/onnxruntime_go", Version: "v1.27.0"}}}
	if err := without(bi, nvmlModule); err != nil {
		t.Fatalf("no NVML: %v", err)
	}
	bi.Deps = append(bi.Deps, &debug.Module{Path: nvmlModule, Version: "v0.13.4-1"})
	if err := without(bi, nvmlModule); err == nil || !strings.Contains(err.Error(), "go-nvml v0.13.4-1 is compiled in") {
		t.Fatalf("NVML compiled in: %v", err)
	}
}
