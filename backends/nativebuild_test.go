package backends

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The status scripts/bootstrap writes for a native build reads as a
// NativeBuild; a running build whose process is gone reads as stopped; a
// file that is not a status reads as none.
func TestParseNativeBuild(t *testing.T) {
	alive := func(pid int) bool { return pid == 42 }
	const head = "pid=42\npercent=37\nstarted=1764662400\nlog=/lib/.native-build/build.log\n"
	b := parseNativeBuild("state=running\n"+head, alive)
	if b == nil || b.State != BuildRunning || b.Percent != 37 || b.PID != 42 || b.Log != "/lib/.native-build/build.log" ||
		!b.Started.Equal(time.Unix(1764662400, 0)) || b.Message != "" {
		t.Fatalf("running = %+v", b)
	}
	b = parseNativeBuild("state=running\npid=7\npercent=37\n", alive)
	if b == nil || b.State != BuildStopped || b.Message == "" {
		t.Fatalf("running, process gone = %+v", b)
	}
	b = parseNativeBuild("state=failed\n"+head+"message=cmake build failed: src/llama.cpp:1: error: x\n", alive)
	if b == nil || b.State != BuildFailed || b.Message != "cmake build failed: src/llama.cpp:1: error: x" {
		t.Fatalf("failed = %+v", b)
	}
	for name, text := range map[string]string{
		"empty":          "",
		"unknown state":  "state=paused\n" + head,
		"no pid":         "state=running\npercent=3\n",
		"pid not number": "state=running\npid=x\npercent=3\n",
		"bad percent":    "state=failed\npid=42\npercent=140\n",
		"garbage":        "\x00\x01state",
	} {
		if b := parseNativeBuild(text, alive); b != nil {
			t.Errorf("%s: %+v, want none", name, b)
		}
	}
}

// Check names the native build of the lib root in llama.cpp's status, and
// only there; none without a status file.
func TestCheckNativeBuild(t *testing.T) {
	root := t.TempDir()
	l := Libs{Root: root}
	if st := l.Check(); st[0].NativeBuild != nil || st[1].NativeBuild != nil {
		t.Fatalf("no status file: %+v", st)
	}
	if err := os.MkdirAll(filepath.Join(root, ".native-build"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := "state=running\npid=" + strconv.Itoa(os.Getpid()) + "\npercent=12\nstarted=0\nlog=x\n"
	if err := os.WriteFile(filepath.Join(root, nativeBuildStatus), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	st := l.Check()
	if b := st[0].NativeBuild; b == nil || b.State != BuildRunning || b.Percent != 12 || !b.Started.IsZero() {
		t.Fatalf("llama.cpp's native build = %+v", b)
	}
	if st[1].NativeBuild != nil {
		t.Fatalf("onnxruntime shows a native build: %+v", st[1].NativeBuild)
	}
	// GET /v1/system and modeld probe --json give it as libraries[].native_build.
	j, err := json.Marshal(st[0])
	if err != nil || !strings.Contains(string(j), `"native_build":{"state":"running","percent":12,"pid":`) {
		t.Fatalf("JSON = %s (%v)", j, err)
	}
}

// processAlive tells a running process from one that has exited; a zombie
// (exited, not reaped) is read from its /proc stat line.
func TestProcessAlive(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Fatal("this process reads as gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if processAlive(cmd.Process.Pid) {
		t.Error("a process that has exited reads as alive")
	}
	for stat, want := range map[string]bool{
		"4242 (bash) S 1 4242 4242 0 -1":     false,
		"4242 (bash) Z 1 4242 4242 0 -1":     true,
		"4242 (a) Z (b)) R 1 4242 4242 0 -1": false,
		"4242 (a) Z (b)) Z 1 4242 4242 0 -1": true,
		"garbage":                            false,
	} {
		if got := zombie([]byte(stat)); got != want {
			t.Errorf("zombie(%q) = %v", stat, got)
		}
	}
}
