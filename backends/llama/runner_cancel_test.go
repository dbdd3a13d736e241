package llama

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

// lineHandler is a slog handler that passes the runner's output lines (the
// "line" attribute of the records StartRunner's process logs) to a channel.
type lineHandler struct{ lines chan string }

func (h lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h lineHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h lineHandler) WithGroup(string) slog.Handler            { return h }
func (h lineHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			select {
			case h.lines <- a.Value.String():
			default: // a test that does not read is not held up
			}
		}
		return true
	})
	return nil
}

// awaitLine reads lines until one contains want.
func awaitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return
			}
		case <-timeout.C:
			t.Fatalf("the runner never wrote %q", want)
		}
	}
}

// TestRunnerTextCallsHonourContext: a tokenize or template call whose caller
// goes away returns the context's error without waiting for the runner, the
// runner sees its client go and drops the request without doing the work,
// and the runner goes on serving.
func TestRunnerTextCallsHonourContext(t *testing.T) {
	path := genModel(t, ggufgen.Tiny(ggufgen.SPM))
	lines := make(chan string, 256)
	opts := runnerOpts(t, path, Options{Slots: 1, ContextSize: 256}, envHoldText+"=1")
	opts.LogLevel = slog.LevelDebug
	opts.Logger = slog.New(lineHandler{lines})
	r, err := StartRunner(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close runner: %v", err)
		}
	})
	calls := []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"tokenize", func(ctx context.Context) error {
			_, err := r.TokenizeContext(ctx, "Hello world", true, false)
			return err
		}},
		{"template", func(ctx context.Context) error {
			_, err := r.ApplyChatTemplateContext(ctx, []Message{{Role: "user", Content: "Hello"}}, true)
			return err
		}},
	}
	for _, call := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- call.do(ctx) }()
		awaitLine(t, lines, textHeld)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("%s after cancel: %v, want context.Canceled", call.name, err)
		}
		awaitLine(t, lines, textGone)
		awaitLine(t, lines, "request dropped, its client is gone")
	}
	// A call whose context is already done never reaches the runner.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.TokenizeContext(ctx, "x", true, false); !errors.Is(err, context.Canceled) {
		t.Errorf("tokenize with a done context: %v", err)
	}
	// The runner still serves.
	if st, err := r.StatsContext(context.Background()); err != nil || st.Active != 0 {
		t.Errorf("stats after the dropped calls: %+v, %v", st, err)
	}
}
