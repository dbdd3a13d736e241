package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/backends/llama/wire"
)

// Runner timing.
const (
	parentPoll       = 500 * time.Millisecond // how often the runner checks its parent
	runnerShutdown   = 10 * time.Second       // bound of a runner's own shutdown
	runnerReadHeader = 10 * time.Second
)

// Main is the main of a runner process (`modeld runner`): it parses
// args, logs to stderr at the requested level (it sets the process's
// default slog logger, which llama.cpp's own log lines go through), loads
// the model and serves it on the socket until ctx is done (the caller
// cancels it on SIGTERM), stdin reaches EOF (the daemon closed it, or died:
// the daemon holds its write end), or the parent process changes. Before
// serving it writes one status line to stdout: ready, or the load error.
// A clean shutdown returns nil; -h returns flag.ErrHelp.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := wire.ParseArgs(args, stderr)
	if err != nil {
		return err
	}
	// JSON lines, which the daemon reads back into records of its own log.
	slog.SetDefault(slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))
	return Run(ctx, cfg, stdin, stdout, Seams{})
}

// Seams are test seams of a runner process.
type Seams struct {
	// Hooks are the engine's.
	Hooks engine.Hooks
	// GenerateDone runs when a /generate request's context ends (the
	// client went away, or the handler returned).
	GenerateDone func()
	// BeforeText runs when a /tokenize or /template request has been
	// read, before the model's work on it starts.
	BeforeText func(ctx context.Context)
}

// Run is Main after its flags were read, with test seams (tests run a
// runner in their own binary).
func Run(ctx context.Context, cfg wire.Config, stdin io.Reader, stdout io.Writer, sm Seams) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		_, err := io.Copy(io.Discard, stdin)
		if err == nil {
			err = io.EOF
		}
		cancel(fmt.Errorf("stdin closed (%w): the daemon stopped this runner or is gone", err))
	}()
	go func() {
		t := time.NewTicker(parentPoll)
		defer t.Stop()
		if err := watchParent(ctx, cfg.ParentPID, os.Getppid, t.C); err != nil {
			cancel(err)
		}
	}()
	fail := func(err error) error {
		_, _ = stdout.Write(wire.EncodeStatus(wire.Status{Error: wire.FromError(err)}))
		return err
	}
	loadStart := time.Now()
	if err := engine.InitCPUVariant(backends.Libs{Root: cfg.LibRoot}.LlamaDir(), cfg.CPUVariant); err != nil {
		return fail(err)
	}
	initMs := time.Since(loadStart).Milliseconds()
	m, err := engine.OpenWithHooks(cfg.ModelPath, cfg.Options, sm.Hooks)
	if err != nil {
		return fail(err)
	}
	_ = os.Remove(cfg.Socket) // a stale socket of an earlier runner
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return fail(errors.Join(fmt.Errorf("llama runner: listen on %s: %w", cfg.Socket, err), m.Close()))
	}
	defer os.Remove(cfg.Socket)
	srv := &http.Server{
		Handler:           (&runnerServer{m: m, seams: sm}).handler(),
		ReadHeaderTimeout: runnerReadHeader,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := stdout.Write(wire.EncodeStatus(wire.Status{Ready: true, PID: os.Getpid()})); err != nil {
		cancel(fmt.Errorf("cannot report readiness: %w", err))
	}
	slog.Info("llama runner: ready", "model", cfg.ModelPath, "pid", os.Getpid(), "socket", cfg.Socket,
		"load_ms", time.Since(loadStart).Milliseconds(), "init_ms", initMs)
	var reason error
	select {
	case <-ctx.Done():
		reason = context.Cause(ctx)
	case err := <-served:
		reason = fmt.Errorf("server stopped: %w", err)
	}
	slog.Info("llama runner: shutting down", "reason", reason)
	return shutdownRunner(srv, m)
}

// shutdownRunner closes the model (every stream ends with ErrClosed, so the
// handlers return) while the server stops taking requests, bounded by
// runnerShutdown; a runner stuck in native code is left to its parent's
// SIGKILL.
func shutdownRunner(srv *http.Server, m *engine.Model) error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), runnerShutdown)
		defer cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Shutdown(ctx) }()
		cerr := m.Close()
		serr := <-stopped
		if serr != nil {
			serr = errors.Join(serr, srv.Close())
		}
		done <- errors.Join(cerr, serr)
	}()
	t := time.NewTimer(runnerShutdown + time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("llama runner: shutdown: %w", err)
		}
		return nil
	case <-t.C:
		return errors.New("llama runner: shutdown did not finish in time")
	}
}

// watchParent returns an error once getppid, read at each tick, is no
// longer want (the parent died and the runner was re-parented), or nil when
// ctx ends. want 0 means the parent at the first call.
func watchParent(ctx context.Context, want int, getppid func() int, tick <-chan time.Time) error {
	if want == 0 {
		want = getppid()
	}
	for {
		if got := getppid(); got != want {
			return fmt.Errorf("parent process %d is gone (parent is now %d)", want, got)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// runnerServer serves one model over the runner protocol.
type runnerServer struct {
	m     *engine.Model
	seams Seams
}

func (s *runnerServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.RouteHealth, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+wire.RouteInfo, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.m.Info()) })
	mux.HandleFunc("GET "+wire.RouteStats, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.m.Stats()) })
	mux.HandleFunc("POST "+wire.RouteTokenize, s.tokenize)
	mux.HandleFunc("POST "+wire.RouteDetokenize, s.detokenize)
	mux.HandleFunc("GET "+wire.RoutePiece, s.piece)
	mux.HandleFunc("POST "+wire.RouteTemplate, s.template)
	mux.HandleFunc("POST "+wire.RouteChatPrompt, s.chatPrompt)
	mux.HandleFunc("POST "+wire.RouteGenerate, s.generate)
	return mux
}

// clientGone reports whether the request's client went away before its
// work started: then the work is skipped, as nobody would read the answer.
func (s *runnerServer) clientGone(r *http.Request) bool {
	if s.seams.BeforeText != nil {
		s.seams.BeforeText(r.Context())
	}
	if err := r.Context().Err(); err != nil {
		slog.Debug("llama runner: request dropped, its client is gone", "path", r.URL.Path, "err", err)
		return true
	}
	return false
}

func (s *runnerServer) tokenize(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.clientGone(r) {
		return
	}
	defer releaseAfter(w, len(body))
	q := r.URL.Query()
	// A long text is tokenized in pieces and stops when the client leaves.
	ids, err := s.m.TokenizeContext(r.Context(), string(body), queryBool(q.Get("add_special")), queryBool(q.Get("parse_special")))
	if err != nil {
		if r.Context().Err() != nil {
			slog.Debug("llama runner: tokenization stopped, its client is gone", "path", r.URL.Path, "bytes", len(body))
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, wire.Tokens{Tokens: ids})
}

func (s *runnerServer) detokenize(w http.ResponseWriter, r *http.Request) {
	var req wire.Tokens
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	text, err := s.m.Detokenize(req.Tokens, queryBool(r.URL.Query().Get("render_special")))
	writeText(w, text, err)
}

func (s *runnerServer) piece(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, err := strconv.ParseInt(q.Get("token"), 10, 32)
	if err != nil {
		writeError(w, fmt.Errorf("%w: token %q: %w", backends.ErrInvalidRequest, q.Get("token"), err))
		return
	}
	text, err := s.m.TokenPiece(int32(id), queryBool(q.Get("render_special")))
	writeText(w, text, err)
}

func (s *runnerServer) template(w http.ResponseWriter, r *http.Request) {
	var req wire.Template
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if s.clientGone(r) {
		return
	}
	text, err := s.m.ApplyChatTemplate(req.Messages, req.AddAssistant)
	writeText(w, text, err)
}

func (s *runnerServer) chatPrompt(w http.ResponseWriter, r *http.Request) {
	var req wire.ChatPrompt
	n, err := decodeBodySize(r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.clientGone(r) {
		return
	}
	defer releaseAfter(w, n)
	ids, err := s.m.ChatPromptContext(backends.WithTemplateVars(r.Context(), req.Vars), req.Messages, req.Tools, req.AddAssistant)
	if err != nil {
		if r.Context().Err() != nil {
			slog.Debug("llama runner: chat prompt stopped, its client is gone", "path", r.URL.Path, "bytes", n)
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, wire.Tokens{Tokens: ids})
}

// generate streams one generation as NDJSON. The request's context ends
// when the client closes the connection (the body was read to the end, so
// the server watches the connection), which stops the sequence within one
// decode step; the stream is still drained to its final event.
func (s *runnerServer) generate(w http.ResponseWriter, r *http.Request) {
	var wr wire.Request
	if err := decodeBody(r, &wr); err != nil {
		writeError(w, err)
		return
	}
	req, err := wr.ToRequest()
	if err != nil {
		writeError(w, err)
		return
	}
	if s.seams.GenerateDone != nil {
		context.AfterFunc(r.Context(), s.seams.GenerateDone)
	}
	if len(req.Prompt) == 0 && req.Text != "" {
		// A raw prompt is tokenized here, in the call that decodes it.
		if req.Prompt, err = s.m.TokenizeContext(r.Context(), req.Text, true, true); err != nil {
			if r.Context().Err() == nil {
				writeError(w, fmt.Errorf("the prompt: %w", err))
			}
			return
		}
		req.Text = ""
	}
	ch, err := s.m.Generate(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set(wire.HeaderPromptTokens, strconv.Itoa(len(req.Prompt)))
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The headers go out now: the client's Generate returns once the
	// request is queued, not when its first token comes.
	broken := rc.Flush() != nil
	line := make([]byte, 0, 512) // reused: a token's event costs no allocation
	for ev := range ch {
		if broken {
			continue
		}
		var err error
		line, err = wire.AppendEventLine(line[:0], ev)
		if err == nil {
			_, err = w.Write(line)
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			broken = true // the client is gone; r.Context() ends the sequence
		}
	}
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxCallBody+1))
	if err != nil {
		return nil, fmt.Errorf("llama runner: read request: %w", err)
	}
	if len(b) > wire.MaxCallBody {
		return nil, fmt.Errorf("%w: request body over %d bytes", backends.ErrInvalidRequest, wire.MaxCallBody)
	}
	return b, nil
}

func decodeBody(r *http.Request, v any) error {
	_, err := decodeBodySize(r, v)
	return err
}

// decodeBodySize is decodeBody, also giving the body's size.
func decodeBodySize(r *http.Request, v any) (int, error) {
	b, err := readBody(r)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return len(b), fmt.Errorf("%w: malformed runner request: %w", backends.ErrInvalidRequest, err)
	}
	return len(b), nil
}

// releaseAt is the request size from which the runner hands the memory
// its work took back to the system at once, rather than keeping the heap
// grown for the next such request (the Go runtime returns it only over
// minutes).
const releaseAt = 1 << 20

// releaseAfter returns the memory of a request of n bytes to the system
// when it was a large one, once its answer is sent.
func releaseAfter(w http.ResponseWriter, n int) {
	if n >= releaseAt {
		_ = http.NewResponseController(w).Flush()
		go debug.FreeOSMemory() // after the handler returned: its buffers are garbage
	}
}

func queryBool(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}

func writeJSON(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	if err := wire.EncodeLine(&b, v); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}

func writeText(w http.ResponseWriter, text string, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.WriteString(w, text)
}

// writeError answers err as a wire.Error. The status is for people reading
// the socket with curl; the client goes by the error's kinds.
func writeError(w http.ResponseWriter, err error) {
	we := wire.FromError(err)
	status := http.StatusInternalServerError
	for _, k := range we.Kinds {
		switch k {
		case "invalid_request", "no_chat_template", "template":
			status = http.StatusBadRequest
		case "busy":
			status = http.StatusServiceUnavailable
		}
	}
	if we.Context != nil {
		status = http.StatusBadRequest
	}
	var b bytes.Buffer
	_ = wire.EncodeLine(&b, we) // strings and ints: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
