package llama

import (
	"context"
	"fmt"
	"github.com/modeld/modeld/backends/llama/runner"
	"github.com/modeld/modeld/backends/llama/wire"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the runner and as a daemon stand-in: StartRunner
// runs this same executable, and TestMain turns it into one of these roles
// when the environment says so.
const (
	envAsRunner = "MODELD_TEST_AS_RUNNER" // "1": run the runner main
	envAsParent = "MODELD_TEST_AS_PARENT" // "1": start a runner, print its pid, wait
	// envPauseAt N: the runner's first generation stops after its N-th token
	// until a generation's client goes away (SIGTERM does not end the pause),
	// so a test can act mid-stream without racing the decoder.
	envPauseAt = "MODELD_TEST_RUNNER_PAUSE_AT"
	// envCrash: the runner writes this to stderr and exits 134 before
	// loading, as a native abort would.
	envCrash = "MODELD_TEST_RUNNER_CRASH"
	// envHang "1": the runner never gets ready.
	envHang = "MODELD_TEST_RUNNER_HANG"
	// envTokenDelay D (a duration): the runner's decode loop spends D after
	// each token, a slow model that keeps making progress.
	envTokenDelay = "MODELD_TEST_RUNNER_TOKEN_DELAY"
	// envHoldText "1": a /tokenize or /template request, once read, waits
	// until its client goes away, saying so on stderr (textHeld, textGone).
	envHoldText = "MODELD_TEST_RUNNER_HOLD_TEXT"
	// envPanicAt N: the runner's decode loop panics after its N-th token (a
	// bug in the runner: the Go runtime prints the panic and a goroutine
	// dump, and the process exits 2).
	envPanicAt = "MODELD_TEST_RUNNER_PANIC_AT"
	// envNotePieces "1": the runner writes textPiece to stderr after each
	// piece of a long text it tokenized.
	envNotePieces = "MODELD_TEST_RUNNER_NOTE_PIECES"
	// envParentModel, envParentLibs: what the parent stand-in loads.
	envParentModel = "MODELD_TEST_PARENT_MODEL"
	envParentLibs  = "MODELD_TEST_PARENT_LIBS"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envAsRunner) == "1":
		os.Exit(testRunnerMain())
	case os.Getenv(envAsParent) == "1":
		os.Exit(testParentMain())
	}
	os.Exit(m.Run())
}

// testRunnerMain is RunnerMain with the test seams the environment asks for.
func testRunnerMain() int {
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "runner" {
		fmt.Fprintln(os.Stderr, "test runner: want the runner subcommand first, got", args)
		return 2
	}
	cfg, err := wire.ParseArgs(args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test runner:", err)
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))
	if msg := os.Getenv(envCrash); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		return 134
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer func() {
		// As modeld's runner command: a SIGTERM still on its way after a
		// stdin EOF must not kill the exiting runner.
		signal.Ignore(syscall.SIGTERM, os.Interrupt)
		stop()
	}()
	if os.Getenv(envHang) == "1" {
		<-ctx.Done()
		return 0
	}
	var sm runner.Seams
	if os.Getenv(envHoldText) == "1" {
		sm.BeforeText = func(ctx context.Context) {
			fmt.Fprintln(os.Stderr, textHeld)
			select {
			case <-ctx.Done():
				fmt.Fprintln(os.Stderr, textGone)
			case <-time.After(2 * time.Minute): // never hold a stray runner forever
			}
		}
	}
	if n, err := strconv.Atoi(os.Getenv(envPauseAt)); err == nil && n > 0 {
		var once sync.Once
		released := make(chan struct{})
		var paused atomic.Bool
		sm.GenerateDone = func() { once.Do(func() { close(released) }) }
		sm.Hooks.AfterToken = func(_, got int) {
			if got != n || paused.Swap(true) {
				return
			}
			fmt.Fprintf(os.Stderr, "test runner: paused after token %d\n", got)
			select {
			case <-released:
			case <-time.After(2 * time.Minute): // never hold a stray runner forever
			}
		}
	}
	if os.Getenv(envNotePieces) == "1" {
		sm.Hooks.TokenizedPiece = func(n int) { fmt.Fprintln(os.Stderr, textPiece, n) }
	}
	if n, err := strconv.Atoi(os.Getenv(envPanicAt)); err == nil && n > 0 {
		next := sm.Hooks.AfterToken
		sm.Hooks.AfterToken = func(slot, got int) {
			if got == n {
				panic(testPanic)
			}
			if next != nil {
				next(slot, got)
			}
		}
	}
	if d, err := time.ParseDuration(os.Getenv(envTokenDelay)); err == nil && d > 0 {
		next := sm.Hooks.AfterToken
		sm.Hooks.AfterToken = func(slot, got int) {
			time.Sleep(d) // the simulated cost of a token, in the runner process
			if next != nil {
				next(slot, got)
			}
		}
	}
	if err := runner.Run(ctx, cfg, os.Stdin, os.Stdout, sm); err != nil {
		fmt.Fprintln(os.Stderr, "test runner:", err)
		return 1
	}
	return 0
}

// testParentMain stands in for the daemon: it starts a runner, prints its
// pid and waits until it is killed.
func testParentMain() int {
	r, err := StartRunner(context.Background(), RunnerOptions{
		ModelPath: os.Getenv(envParentModel), LibRoot: os.Getenv(envParentLibs),
		Options: Options{Slots: 1, ContextSize: 256}, Env: []string{envAsRunner + "=1"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test parent:", err)
		return 1
	}
	fmt.Printf("runner-pid %d\n", r.PID())
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed (or the test closes stdin)
	return 0
}

// testPanic is the value a runner with envPanicAt panics with.
const testPanic = "test runner: simulated bug"

// What a runner with envHoldText (or envNotePieces) writes to stderr.
const (
	textPiece = "test runner: tokenized a piece of"
	textHeld  = "test runner: text request held"
	textGone  = "test runner: text request's client went away"
)
