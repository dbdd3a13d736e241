package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/testenv"
)

// TestMain lets the test binary act as the modeld binary: with MODELD_TEST_MAIN set
// it runs main() with the arguments after "--".
func TestMain(m *testing.M) {
	if os.Getenv("MODELD_TEST_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"modeld"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startDaemon runs `modeld serve` in a child process on a free port, with home as
// MODELD_HOME (a fresh temp dir when empty) and the real runtime libraries, and
// returns its base URL once it listens, with the log lines up to then.
func startDaemon(t *testing.T, home string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	logs := &bytes.Buffer{}
	started := false
	cmd, base := startDaemonLines(t, home, func(line string, listening bool) {
		if !started {
			logs.WriteString(line + "\n")
		}
		started = started || listening
	}, args...)
	return cmd, base, logs
}

// startDaemonLines runs `modeld serve` as startDaemon does and hands each line
// of its log to line (from one goroutine, in order; listening true for the line
// that says where it listens), and returns its base URL once it listens. The
// log is read to its end, so the daemon never blocks on it.
func startDaemonLines(t *testing.T, home string, line func(text string, listening bool), args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--", "serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LOG_FORMAT=json",
		"MODELD_LIB_DIR="+testenv.LibDir(t))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addrRE := regexp.MustCompile(`"msg":"modeld listening","addr":"([^"]+)"`)
	listening := make(chan string, 1)
	var head bytes.Buffer // the lines before it listens, for the failure
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		found := false
		for sc.Scan() {
			m := addrRE.FindStringSubmatch(sc.Text())
			line(sc.Text(), m != nil)
			if !found {
				head.WriteString(sc.Text() + "\n")
			}
			if m != nil && !found {
				found = true
				listening <- "http://" + m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		close(listening)
	}()
	base, ok := <-listening
	if !ok {
		t.Fatalf("daemon exited before listening:\n%s", head.String())
	}
	return cmd, base
}

func TestServeHealthSystemAndSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, base, _ := startDaemon(t, "")
			res, err := http.Get(base + "/health")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("/health = %d", res.StatusCode)
			}
			res, err = http.Get(base + "/v1/system")
			if err != nil {
				t.Fatal(err)
			}
			var sys struct {
				Probe struct {
					CPU      struct{ Threads int }
					Backends []struct{ Kind, Reason string }
				}
				Libraries []struct {
					Name      string
					Installed bool
				}
			}
			if err := json.NewDecoder(res.Body).Decode(&sys); err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if sys.Probe.CPU.Threads < 1 || len(sys.Probe.Backends) != 4 || len(sys.Libraries) != 2 {
				t.Fatalf("/v1/system = %+v", sys)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("daemon exited with %v after %s", err, sig)
				}
			case <-time.After(hangCeiling):
				t.Fatalf("daemon still running %s after %s", hangCeiling, sig)
			}
		})
	}
}

func runCLI(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	root := newRootCommand(&out, &errb, getenv)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

func TestProbeJSON(t *testing.T) {
	out, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir()}, "probe", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		CPU    struct{ Threads int }
		Memory struct {
			TotalBytes uint64 `json:"total_bytes"`
		}
		Backends []struct {
			Kind   string
			Usable bool
			Reason string
		}
		Libraries []struct {
			Installed bool
			Fix       string
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("probe --json is not JSON: %v\n%s", err, out)
	}
	if v.CPU.Threads < 1 || v.Memory.TotalBytes == 0 {
		t.Fatalf("probe = %+v", v)
	}
	kinds := map[string]bool{}
	for _, b := range v.Backends {
		kinds[b.Kind] = true
		if !b.Usable && b.Reason == "" {
			t.Errorf("backend %s unusable without a reason", b.Kind)
		}
	}
	for _, k := range []string{"cpu", "cuda", "vulkan", "metal"} {
		if !kinds[k] {
			t.Errorf("no status line for %s", k)
		}
	}
	// An empty home has no libraries: the probe says which command installs them.
	for _, l := range v.Libraries {
		if l.Installed || !strings.HasPrefix(l.Fix, "scripts/bootstrap") {
			t.Errorf("library status in an empty home = %+v", l)
		}
	}
}

func TestProbeTable(t *testing.T) {
	out, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir()}, "probe")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BACKEND", "cuda", "vulkan", "LIBRARY", "run scripts/bootstrap"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe table lacks %q:\n%s", want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	out, err := runCLI(t, nil, "version")
	if err != nil || !strings.HasPrefix(out, "modeld ") {
		t.Fatalf("version = %q, %v", out, err)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	_, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir(), "MODELD_MAX_LOADED": "-2"}, "serve")
	if err == nil || !strings.Contains(err.Error(), "invalid max-loaded (environment MODELD_MAX_LOADED)") {
		t.Fatalf("err = %v", err)
	}
}
