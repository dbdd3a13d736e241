package llama

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modeld/modeld/backends/llama/wire"
)

// TestReadEvent: the relay's line reader gives every event of a stream in
// order, a line longer than its buffer (logprobs, tool calls) included,
// skips blank lines, and tells a stream cut mid-line (ErrUnexpectedEOF)
// from one that ended after its last line (EOF).
func TestReadEvent(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	evs := []Event{{Token: 1, Text: "a"}, {Token: 2, Text: long}, {Token: 3, Text: "<b>\n"},
		{Token: -1, Done: true, Finish: FinishLength, Usage: Usage{PromptTokens: 2, CompletionTokens: 3}}}
	var stream []byte
	for i, ev := range evs {
		var err error
		if stream, err = wire.AppendEventLine(stream, ev); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			stream = append(stream, "\n  \n"...)
		}
	}
	read := func(s string) ([]Event, error) {
		rd := bufio.NewReaderSize(strings.NewReader(s), 16) // smaller than every line
		var buf []byte
		var got []Event
		for {
			ev, err := readEvent(rd, &buf, maxEventLine)
			if err != nil {
				return got, err
			}
			got = append(got, ev)
		}
	}
	got, err := read(string(stream))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the stream: %v, want io.EOF", err)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events, want %d", len(got), len(evs))
	}
	for i := range evs {
		if got[i].Token != evs[i].Token || got[i].Text != evs[i].Text || got[i].Done != evs[i].Done || got[i].Usage != evs[i].Usage {
			t.Errorf("event %d: %+v, want %+v", i, got[i].Token, evs[i].Token)
		}
	}
	// The last line without its newline is still an event.
	if got, err = read(strings.TrimSuffix(string(stream), "\n")); len(got) != len(evs) || !errors.Is(err, io.EOF) {
		t.Errorf("without the last newline: %d events, %v", len(got), err)
	}
	// Cut inside a line.
	cut := string(stream[:len(stream)-20])
	if got, err = read(cut); len(got) != len(evs)-1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut mid-line: %d events, %v; want %d and io.ErrUnexpectedEOF", len(got), err, len(evs)-1)
	}
	// A line that is not an event is an error, not an event.
	if _, err = read("{\"Token\":1,\"Text\":\"a\"}x\n"); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a malformed line gave %v", err)
	}
}

// TestOversizedEventKillsRunner: a runner that answers /generate with an
// event line that never ends (here 256 MiB and counting) is killed when the
// line passes the bound, its stream ends with an error saying why, and the
// daemon's side reads and holds only about the bound, not the line.
func TestOversizedEventKillsRunner(t *testing.T) {
	const offered = 256 << 20
	var sent atomic.Int64
	r := standInRunner(t, RunnerOptions{StallTimeout: -1}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.RouteGenerate {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"Token":1,"Text":"a","Done":false,"Finish":"","Usage":{}}`+"\n"+`{"Token":2,"Text":"`)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for sent.Load() < offered {
			if _, err := w.Write(chunk); err != nil {
				return // the daemon's side stopped reading
			}
			sent.Add(int64(len(chunk)))
		}
	})

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	evs := collect(t, mustGenerate(t, r, Request{Prompt: []int32{1, 2}, MaxTokens: 10}))
	runtime.ReadMemStats(&after)
	final := evs[len(evs)-1]
	if len(evs) != 2 || evs[0].Text != "a" || final.Finish != FinishError || !errors.Is(final.Err, ErrRunnerExited) ||
		!strings.Contains(final.Err.Error(), "it sent a stream event over 16 MiB") {
		t.Fatalf("events %d, final %+v; want the first token, then an error naming the oversized event", len(evs), final)
	}
	<-r.Done()
	if err := r.proc.cmd.ProcessState; err == nil || err.Success() {
		t.Errorf("the runner was not killed: %v", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("runner offered %d MiB; daemon side allocated %d MiB reading it (bound %d MiB)", sent.Load()>>20, allocated>>20, maxEventLine>>20)
	if sent.Load() >= offered {
		t.Errorf("the whole %d MiB line was read", offered>>20)
	}
	if allocated > 8*maxEventLine {
		t.Errorf("reading the line allocated %d MiB, want a few times the %d MiB bound", allocated>>20, maxEventLine>>20)
	}
}

// TestOversizedAnswerKillsRunner: a runner that answers a plain call (here
// /tokenize) with a body that never ends is killed once the answer passes
// the bound; the call fails saying why, and the daemon's side reads only
// about the bound.
func TestOversizedAnswerKillsRunner(t *testing.T) {
	const offered = 1 << 30
	var sent atomic.Int64
	r := standInRunner(t, RunnerOptions{StallTimeout: -1, CallTimeout: 10 * time.Minute}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"tokens":[`)
		chunk := []byte(strings.Repeat("1,", 1<<19))
		for sent.Load() < offered {
			if _, err := w.Write(chunk); err != nil {
				return // the daemon's side stopped reading
			}
			sent.Add(int64(len(chunk)))
		}
	})

	_, err := r.Tokenize("hello", true, false)
	if !errors.Is(err, ErrRunnerExited) || !strings.Contains(err.Error(), "with over 64 MiB") {
		t.Fatalf("tokenize: %v; want the runner's death for its oversized answer", err)
	}
	<-r.Done()
	if st := r.proc.cmd.ProcessState; st == nil || st.Success() {
		t.Errorf("the runner was not killed: %v", st)
	}
	if sent.Load() >= offered {
		t.Errorf("the whole %d MiB answer was read", offered>>20)
	}
	t.Logf("runner offered %d MiB; the bound is %d MiB", sent.Load()>>20, maxCallAnswer>>20)
}

// standInRunner is a Runner whose process is a stand-in (sleep) and whose
// socket answers with handler: a runner that goes wrong in the way the
// handler says, for the daemon's side to survive.
func standInRunner(t *testing.T, opts RunnerOptions, handler http.HandlerFunc) *Runner {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	opts.ModelPath, opts.StopGrace, opts.Logger = "stand-in", time.Second, slog.New(slog.DiscardHandler)
	proc, err := startProcess([]string{"sleep", "600"}, nil, opts.Logger, crashReports{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{opts: opts, proc: proc, client: unixClient(socket), live: newLiveness(), unwatch: make(chan struct{})}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
