package backends

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BuildState is where a build of llama.cpp for this CPU stands.
type BuildState string

const (
	// BuildRunning: the build's process is compiling.
	BuildRunning BuildState = "running"
	// BuildStopped: it was stopped (Ctrl-C, kill, reboot); its tree is kept
	// and the next scripts/bootstrap --native goes on from where it stopped.
	BuildStopped BuildState = "stopped"
	// BuildFailed: it ended with an error, which Message gives.
	BuildFailed BuildState = "failed"
)

// NativeBuild is a build of llama.cpp for this CPU that scripts/bootstrap
// (--native, or --native-background under make run) has under way or left
// unfinished in a lib root. A finished build leaves none: it is installed in
// llama/ and LibStatus.Version names it.
type NativeBuild struct {
	State   BuildState `json:"state"`
	Percent int        `json:"percent"` // of the compile, as cmake counts it
	Started time.Time  `json:"started,omitzero"`
	PID     int        `json:"pid,omitempty"`
	Log     string     `json:"log,omitempty"`     // cmake's output
	Message string     `json:"message,omitempty"` // why it failed or stopped
}

// nativeBuildStatus is the file scripts/bootstrap writes for its native
// build, in the lib root: key=value lines (state, pid, percent, started in
// Unix seconds, log, message), replaced whole at each change.
const nativeBuildStatus = ".native-build/status"

// NativeBuild reads the state of a native build in the lib root: nil when
// there is none, or when its status file is missing or cannot be read as one.
func (l Libs) NativeBuild() *NativeBuild {
	f, err := os.Open(filepath.Join(l.Root, nativeBuildStatus))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 8<<10))
	if err != nil {
		return nil
	}
	return parseNativeBuild(string(b), processAlive)
}

// parseNativeBuild reads a status file's text; alive tells whether the
// process of a running build is still there (a build whose process is gone
// was stopped outright: killed, or the machine rebooted). Anything it cannot
// read as a status (an unknown state, a pid or percentage that is no number)
// is nil.
func parseNativeBuild(text string, alive func(pid int) bool) *NativeBuild {
	kv := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	b := &NativeBuild{State: BuildState(kv["state"]), Log: kv["log"], Message: kv["message"]}
	switch b.State {
	case BuildRunning, BuildStopped, BuildFailed:
	default:
		return nil
	}
	var err error
	if b.PID, err = strconv.Atoi(kv["pid"]); err != nil || b.PID <= 0 {
		return nil
	}
	if b.Percent, err = strconv.Atoi(kv["percent"]); err != nil || b.Percent < 0 || b.Percent > 100 {
		return nil
	}
	if s, err := strconv.ParseInt(kv["started"], 10, 64); err == nil && s > 0 {
		b.Started = time.Unix(s, 0).UTC()
	}
	if b.State == BuildRunning && !alive(b.PID) {
		b.State = BuildStopped
		b.Message = "its process is gone; the next scripts/bootstrap --native goes on from where it stopped"
	}
	return b
}

// processAlive reports whether process pid exists (one of another user
// counts); on Linux a zombie, which has exited but is not reaped yet, does not.
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	if err := p.Signal(syscall.Signal(0)); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc (macOS): the signal's answer stands
	}
	return !zombie(stat)
}

// zombie reads the state of a /proc/PID/stat line, "pid (comm) S ...": the
// state follows the command's closing parenthesis (the command may hold one).
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
