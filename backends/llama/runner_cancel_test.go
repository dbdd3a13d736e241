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
	timeout := time.NewTimer(hangCeiling)
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

// TestRunnerLongTokenizeStopsWhenClientLeaves: a tokenization of a long
// text whose caller goes away stops in the runner at the next piece (it
// used to run to its end, unseen), and the runner serves the next request.
func TestRunnerLongTokenizeStopsWhenClientLeaves(t *testing.T) {
	path := genModel(t, ggufgen.Tiny(ggufgen.BPE))
	lines := make(chan string, 4096)
	opts := runnerOpts(t, path, Options{Slots: 1, ContextSize: 256}, envNotePieces+"=1")
	opts.LogLevel = slog.LevelDebug
	opts.Logger = slog.New(lineHandler{lines})
	r, err := StartRunner(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	text := strings.Repeat("Tell me a long story about a fox.\nIt jumps over 12 dogs, then sleeps.\n", 16<<20/70)

	// Pieces are cut at the first good place within a quarter piece past
	// 256 KiB: the text has at least this many (64 here; its whole
	// tokenization takes 30 s on a loaded 2-core machine).
	pieces := len(text) / (256 << 10 * 5 / 4)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.TokenizeContext(ctx, text, true, false)
		errc <- err
	}()
	awaitLine(t, lines, textPiece)
	cancel()
	left := time.Now()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("tokenize after cancel: %v", err)
	}
	// The runner stops at a piece boundary: it logs the stop, having done
	// fewer pieces than the text has.
	done := 1
	timeout := time.NewTimer(hangCeiling)
	defer timeout.Stop()
	for stopped := false; !stopped; {
		select {
		case l := <-lines:
			switch {
			case strings.Contains(l, textPiece):
				done++
			case strings.Contains(l, "tokenization stopped, its client is gone"):
				stopped = true
			}
		case <-timeout.C:
			t.Fatal("the runner never stopped the tokenization")
		}
	}
	t.Logf("%d MiB text: after the client left, the runner stopped after %d pieces (of at least %d), %s later",
		len(text)>>20, done, pieces, time.Since(left).Round(time.Millisecond))
	if done >= pieces/2 {
		t.Errorf("the runner tokenized %d of at least %d pieces after its client left", done, pieces)
	}
	if ids, err := r.TokenizeContext(context.Background(), "hello", true, false); err != nil || len(ids) == 0 {
		t.Fatalf("the next request: %v, %v", ids, err)
	}
}
