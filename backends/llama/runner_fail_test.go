package llama

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// TestStartRunnerBadModels: a truncated or garbage file, a runner that
// dies while loading, one that never gets ready, missing libraries: each
// gives a clear error from StartRunner, no hang, and no process left.
func TestStartRunnerBadModels(t *testing.T) {
	var good bytes.Buffer
	if err := ggufgen.Write(&good, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write("truncated.gguf", good.Bytes()[:good.Len()/2])
	garbage := write("garbage.gguf", bytes.Repeat([]byte("no model here "), 5000))
	fine := write("fine.gguf", good.Bytes())
	opts := Options{Slots: 1, ContextSize: 128}

	for _, path := range []string{truncated, garbage} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := StartRunner(context.Background(), runnerOpts(t, path, opts))
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want ErrInvalidModel naming the file", err)
			}
			if !strings.Contains(err.Error(), "runner stderr ended with") {
				t.Errorf("err = %v, want the runner's stderr", err)
			}
		})
	}
	t.Run("crash while loading", func(t *testing.T) {
		_, err := StartRunner(context.Background(), runnerOpts(t, fine, opts, envCrash+"=GGML_ASSERT(simulated) failed"))
		var ee *RunnerExitError
		if !errors.As(err, &ee) || ee.Status != "exit status 134" || !strings.Contains(ee.Stderr, "GGML_ASSERT(simulated) failed") {
			t.Fatalf("err = %v, want a RunnerExitError with status 134 and the stderr line", err)
		}
		if !strings.Contains(err.Error(), fine) {
			t.Errorf("err = %v does not name the model", err)
		}
	})
	t.Run("never ready", func(t *testing.T) {
		o := runnerOpts(t, fine, opts, envHang+"=1")
		o.LoadTimeout = 500 * time.Millisecond
		_, err := StartRunner(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "not ready after 500ms") {
			t.Fatalf("err = %v, want a load timeout", err)
		}
	})
	t.Run("cancelled start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := StartRunner(ctx, runnerOpts(t, fine, opts, envHang+"=1"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("no libraries", func(t *testing.T) {
		o := runnerOpts(t, fine, opts)
		o.LibRoot = t.TempDir()
		_, err := StartRunner(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "libllama.so missing") {
			t.Fatalf("err = %v, want the missing library named", err)
		}
	})
	t.Run("not a program", func(t *testing.T) {
		o := runnerOpts(t, fine, opts)
		o.Command = []string{filepath.Join(dir, "absent-binary")}
		if _, err := StartRunner(context.Background(), o); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("err = %v", err)
		}
	})
	// A good model still loads after all that.
	r := startRunner(t, fine, opts)
	if r.Info().Arch != "llama" {
		t.Errorf("info %+v", r.Info())
	}
}

// TestRunnerExitsWithParent: SIGKILL of the process that started a runner
// makes the runner exit.
func TestRunnerExitsWithParent(t *testing.T) {
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	testenv.LlamaDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), envAsParent+"=1", envParentModel+"="+path, envParentLibs+"="+testenv.LibDir(t))
	var stderr bytes.Buffer
	parent.Stderr = &stderr
	in, err := parent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	var pid int
	if _, serr := fmt.Sscanf(line, "runner-pid %d", &pid); err != nil || serr != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("parent said %q (%v); stderr: %s", line, err, stderr.String())
	}
	if !processAlive(pid) {
		t.Fatalf("runner %d not running", pid)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitFor(t, fmt.Sprintf("runner %d to exit after its parent", pid), func() bool { return !processAlive(pid) })
}

// TestRunnerExitsOnStdinEOF: the runner's own guard, without the kernel's
// parent-death signal: when its stdin reaches EOF it shuts down cleanly.
func TestRunnerExitsOnStdinEOF(t *testing.T) {
	r := startRunner(t, genModel(t, ggufgen.Tiny(ggufgen.BPE)), Options{Slots: 1, ContextSize: 128})
	if err := r.proc.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	var ee *RunnerExitError
	if !errors.As(r.Err(), &ee) || ee.Status != "exit status 0" || !strings.Contains(ee.Stderr, "stdin closed") {
		t.Errorf("Err() = %v, want a clean exit because stdin closed", r.Err())
	}
}
