package llama

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	psprocess "github.com/shirou/gopsutil/v4/process"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// runnerOpts are the options of a test runner: this test binary as the
// runner (see TestMain), with env added.
func runnerOpts(t testing.TB, path string, opts Options, env ...string) RunnerOptions {
	t.Helper()
	testenv.LlamaDir(t) // fails the test when the libraries are not installed
	return RunnerOptions{
		ModelPath: path, LibRoot: testenv.LibDir(t), Options: opts,
		Env: append([]string{envAsRunner + "=1"}, env...), LoadTimeout: 2 * time.Minute,
	}
}

// startRunner starts a test runner and, at the end of the test, closes it
// and checks that its process is gone.
func startRunner(t testing.TB, path string, opts Options, env ...string) *Runner {
	t.Helper()
	r, err := StartRunner(context.Background(), runnerOpts(t, path, opts, env...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close runner: %v", err)
		}
		if processAlive(r.PID()) {
			t.Errorf("runner %d still alive after Close", r.PID())
		}
	})
	return r
}

// processAlive reports whether pid is a live process (a zombie is not).
func processAlive(pid int) bool {
	p, err := psprocess.NewProcess(int32(pid))
	if err != nil {
		return false
	}
	st, err := p.Status()
	if err != nil {
		return false
	}
	return !slices.Contains(st, psprocess.Zombie)
}

// hangCeiling bounds the waits on a runner process: it only turns a hang into
// a failure, and no assertion depends on it.
const hangCeiling = 5 * time.Minute

// waitFor polls cond until it holds, failing the test after hangCeiling. It is
// for events that happen in another process, which give no channel.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	limit := hangCeiling
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		<-tick.C
	}
}

// collect drains a stream into its events.
func collect(t testing.TB, ch <-chan Event) []Event {
	t.Helper()
	var evs []Event
	for ev := range ch {
		evs = append(evs, ev)
	}
	if len(evs) == 0 || !evs[len(evs)-1].Done {
		t.Fatalf("stream closed without a final event (%d events)", len(evs))
	}
	return evs
}

// takeTokens reads n token events from ch.
func takeTokens(t testing.TB, ch <-chan Event, n int) []int32 {
	t.Helper()
	var ids []int32
	for len(ids) < n {
		ev, ok := <-ch
		if !ok || ev.Done {
			t.Fatalf("stream ended after %d tokens (want %d): %+v", len(ids), n, ev)
		}
		ids = append(ids, ev.Token)
	}
	return ids
}

func eventTokens(evs []Event) []int32 {
	var ids []int32
	for _, ev := range evs {
		if !ev.Done {
			ids = append(ids, ev.Token)
		}
	}
	return ids
}

// sameErr checks that got behaves like want for callers: the same message
// and the same answers to errors.Is for every engine sentinel.
func sameErr(t testing.TB, what string, got, want error) {
	t.Helper()
	if want == nil || got == nil {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	if got.Error() != want.Error() {
		t.Errorf("%s: message %q, want %q", what, got, want)
	}
	for _, k := range sentinels {
		if errors.Is(got, k) != errors.Is(want, k) {
			t.Errorf("%s: errors.Is(%v) = %v, want %v", what, k, errors.Is(got, k), errors.Is(want, k))
		}
	}
}

// sentinels are the errors that survive the runner socket.
var sentinels = []error{
	ErrInvalidRequest, ErrBusy, backends.ErrContextOverflow, backends.ErrWrongModel,
	ErrRunnerStalled, ErrClosed, ErrInvalidModel, ErrNoChatTemplate, ErrTemplate,
	ErrDecode, ErrNotInitialized, ErrRunnerExited, context.Canceled, context.DeadlineExceeded,
}

// initLib loads the native library for the tests that compare a runner
// with the engine in this process.
func initLib(t testing.TB) {
	t.Helper()
	if err := engine.Init(testenv.LlamaDir(t)); err != nil {
		t.Fatal(err)
	}
}

// genModel writes a generated model into the test's temp dir.
func genModel(t testing.TB, o ggufgen.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := ggufgen.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

var bothVocabs = []ggufgen.VocabKind{ggufgen.SPM, ggufgen.BPE}
