package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/probe"
)

// modeld probe names a native build of llama.cpp under way, or why one did
// not finish, under the library table; none, no line.
func TestPrintProbeNativeBuild(t *testing.T) {
	started := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	libs := []backends.LibStatus{
		{Name: "llama.cpp", Dir: "/lib/llama", Installed: true, Version: "@node-llama-cpp/linux-x64@3.21.1",
			NativeBuild: &backends.NativeBuild{State: backends.BuildRunning, Percent: 42, Started: started, Log: "/lib/.native-build/build.log"}},
		{Name: "onnxruntime", Dir: "/lib/onnxruntime", Installed: true, Version: "onnxruntime-node@1.30.0"},
	}
	var out bytes.Buffer
	printProbe(&out, probe.Info{}, libs)
	if n := strings.Count(out.String(), "build for this CPU"); n != 1 || !strings.Contains(out.String(), "llama.cpp build for this CPU: running, 42 %") {
		t.Fatalf("%d build lines:\n%s", n, out.String())
	}
	if got := nativeBuildLine(*libs[0].NativeBuild, started.Add(90*time.Second)); got !=
		"running, 42 % after 1m30s; models loaded after it is installed use it (log /lib/.native-build/build.log)" {
		t.Errorf("running: %q", got)
	}
	failed := backends.NativeBuild{State: backends.BuildFailed, Percent: 7, Message: "cmake build failed: x.c:1: error: y", Log: "/l"}
	if got := nativeBuildLine(failed, started); got != "failed at 7 %: cmake build failed: x.c:1: error: y (log /l)" {
		t.Errorf("failed: %q", got)
	}
	libs[0].NativeBuild = nil
	out.Reset()
	printProbe(&out, probe.Info{}, libs)
	if strings.Contains(out.String(), "build for this CPU") {
		t.Errorf("a build line without a build:\n%s", out.String())
	}
}
