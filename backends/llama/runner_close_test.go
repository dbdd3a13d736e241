package llama

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/backends/llama/wire"
)

// closeRunner is a Runner around a stand-in process: script, run by
// /bin/sh, reports ready on stdout once its SIGTERM handling is set up;
// onExit is the process's cleanup (the socket directory's removal).
func closeRunner(t *testing.T, script string, grace time.Duration, onExit func() error) *Runner {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	ready := "echo '" + wire.StatusPrefix + `{"ready":true}'`
	proc, err := startProcess([]string{"/bin/sh", "-c", script + "; " + ready + "; while :; do sleep 0.1; done"}, nil, log, crashReports{}, onExit)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.status:
	case <-proc.done:
		t.Fatalf("the stand-in runner exited before it was ready: %v", proc.exitErr)
	}
	return &Runner{opts: RunnerOptions{ModelPath: "stand-in", StallTimeout: -1, StopGrace: grace, Logger: log},
		proc: proc, client: unixClient("/nonexistent.sock"), live: newLiveness(), unwatch: make(chan struct{})}
}

// TestRunnerCloseErrors: Close returns what went wrong while the runner
// stopped — an exit status other than 0 on SIGTERM (with stderr's tail), a
// runner that ignored SIGTERM and had to be killed, the socket's cleanup
// failing — and nil for a runner that exits 0; a second Close returns the
// first's error.
func TestRunnerCloseErrors(t *testing.T) {
	errSocket := errors.New("socket directory busy")
	for _, tc := range []struct {
		name   string
		script string
		onExit func() error
		want   []string // in the error; nil: no error
		is     error
	}{
		{name: "clean exit", script: "trap 'exit 0' TERM"},
		{name: "exit status", script: "trap 'echo flushing the KV failed >&2; exit 3' TERM",
			want: []string{"ended its shutdown with exit status 3", "flushing the KV failed"}},
		{name: "ignores SIGTERM", script: "trap '' TERM",
			want: []string{"did not exit within 200ms of SIGTERM; killed"}},
		{name: "socket cleanup", script: "trap 'exit 0' TERM", onExit: func() error { return errSocket },
			want: []string{"socket directory busy"}, is: errSocket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grace := time.Minute // a generous ceiling for the runners that exit
			if tc.name == "ignores SIGTERM" {
				grace = 200 * time.Millisecond
			}
			r := closeRunner(t, tc.script, grace, tc.onExit)
			err := r.Close()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Close: %v, want nil", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Close returned nil, want an error with %q", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Close: %v; want it to say %q", err, w)
					}
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("Close: %v does not wrap %v", err, tc.is)
				}
			}
			if again := r.Close(); (again == nil) != (err == nil) || (err != nil && again.Error() != err.Error()) {
				t.Errorf("second Close: %v, the first said %v", again, err)
			}
			if !r.proc.exited() {
				t.Error("the process is not reaped after Close")
			}
		})
	}
}

// TestRunnerCloseAfterDeath: Close of a runner that had already died on
// its own returns nil (Err reports the death, with its status).
func TestRunnerCloseAfterDeath(t *testing.T) {
	r := closeRunner(t, "trap 'exit 0' TERM", time.Second, nil)
	r.proc.kill()
	if err := r.Close(); err != nil {
		t.Errorf("Close after the runner died: %v, want nil", err)
	}
	var exit *RunnerExitError
	if !errors.As(r.Err(), &exit) || !strings.Contains(exit.Status, "SIGKILL") {
		t.Errorf("Err() = %v, want the runner's death by SIGKILL", r.Err())
	}
}
