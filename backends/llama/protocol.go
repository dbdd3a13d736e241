package llama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modeld/modeld/backends"
)

// The runner protocol: HTTP/1.1 over a unix socket, spoken only between the
// daemon and the runner processes it starts (both the same binary, so the
// two ends never differ in version). Requests and replies are JSON, except
// where the payload is text that may hold any bytes: /tokenize takes the raw
// text as its body, /detokenize, /piece and /template answer with the raw
// text. /generate answers with one JSON event per line (NDJSON), flushed
// per event. A failed call answers a non-2xx status with a wireError.
//
// The runner reports its start on stdout with one line that begins with
// statusPrefix: {"ready":true} once it serves, or {"error":...} when it
// could not load the model. Everything else it prints goes to stderr.
const (
	routeHealth     = "/health"
	routeInfo       = "/info"
	routeStats      = "/stats"
	routeTokenize   = "/tokenize"   // ?add_special=&parse_special=, body: text
	routeDetokenize = "/detokenize" // ?render_special=, body: {"tokens":[...]}
	routePiece      = "/piece"      // ?token=&render_special=
	routeTemplate   = "/template"   // body: wireTemplate
	routeGenerate   = "/generate"   // body: wireRequest

	statusPrefix = "modeld-runner-status "

	// maxCallBody bounds a request body the runner reads (a prompt of a
	// million tokens is ~8 MB of JSON).
	maxCallBody = 64 << 20
)

// runnerStatus is the one start line of a runner on stdout.
type runnerStatus struct {
	Ready bool       `json:"ready,omitempty"`
	PID   int        `json:"pid,omitempty"`
	Error *wireError `json:"error,omitempty"`
}

// wireError carries an engine error across the socket: its message, the
// sentinels it wraps (by name) and the typed errors of package backends it
// holds, with their fields (a context overflow's numbers, a busy model's
// retry-after, a refused parameter), so that errors.Is and errors.As give
// the same answers on both ends.
type wireError struct {
	Message string   `json:"message"`
	Kinds   []string `json:"kinds,omitempty"`
	// Context is set for a *backends.ContextOverflowError.
	Context    *backends.ContextOverflowError `json:"context,omitempty"`
	Busy       *backends.BusyError            `json:"busy,omitempty"`
	BadRequest *backends.BadRequestError      `json:"bad_request,omitempty"`
	Died       *backends.RunnerDiedError      `json:"died,omitempty"`
}

// errorKinds names the sentinels that survive the trip, so callers can use
// errors.Is whether the model runs in-process or in a runner.
var errorKinds = []struct {
	name string
	err  error
}{
	{"invalid_request", ErrInvalidRequest},
	{"busy", ErrBusy},
	{"context_overflow", backends.ErrContextOverflow},
	{"wrong_model", backends.ErrWrongModel},
	{"runner_stalled", ErrRunnerStalled},
	{"closed", ErrClosed},
	{"invalid_model", ErrInvalidModel},
	{"no_chat_template", ErrNoChatTemplate},
	{"template", ErrTemplate},
	{"decode", ErrDecode},
	{"not_initialized", ErrNotInitialized},
	{"runner_exited", ErrRunnerExited},
	{"canceled", context.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded},
}

// toWire describes err for the other end; nil for nil.
func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Message: err.Error()}
	var cl *backends.ContextOverflowError
	if errors.As(err, &cl) {
		c := *cl
		w.Context = &c
	}
	var be *backends.BusyError
	if errors.As(err, &be) {
		c := *be
		w.Busy = &c
	}
	var br *backends.BadRequestError
	if errors.As(err, &br) {
		w.BadRequest = &backends.BadRequestError{Param: br.Param, Message: br.Error(), Code: br.Code}
	}
	var rd *backends.RunnerDiedError
	if errors.As(err, &rd) {
		c := *rd
		w.Died = &c
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			w.Kinds = append(w.Kinds, k.name)
		}
	}
	return w
}

// toError rebuilds the error: same message, and errors.Is / errors.As give
// the same answers as for the original. Kinds it does not know are dropped.
func (w *wireError) toError() error {
	if w == nil {
		return nil
	}
	re := &remoteError{msg: w.Message}
	if w.Context != nil {
		c := *w.Context
		re.wrapped = append(re.wrapped, &c)
	}
	if w.Busy != nil {
		c := *w.Busy
		re.wrapped = append(re.wrapped, &c)
	}
	if w.BadRequest != nil {
		c := *w.BadRequest
		re.wrapped = append(re.wrapped, &c)
	}
	if w.Died != nil {
		c := *w.Died
		re.wrapped = append(re.wrapped, &c)
	}
	for _, name := range w.Kinds {
		for _, k := range errorKinds {
			if k.name == name {
				re.wrapped = append(re.wrapped, k.err)
			}
		}
	}
	return re
}

// remoteError is an error that crossed the runner socket.
type remoteError struct {
	msg     string
	wrapped []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.wrapped }

// wireEvent is an Event on the wire: Err travels as a wireError.
type wireEvent struct {
	Event
	Err *wireError `json:"Err,omitempty"`
}

func toWireEvent(ev Event) wireEvent {
	return wireEvent{Event: ev, Err: toWire(ev.Err)}
}

func (w wireEvent) event() Event {
	ev := w.Event
	ev.Err = w.Err.toError()
	return ev
}

// wireRequest is a Request on the wire. JSON has no infinities, and a logit
// bias of -Inf is how a token is banned, so the biases travel as strings
// ("-Inf", "2.5") beside the rest of the request.
type wireRequest struct {
	Request
	LogitBias map[int32]string `json:"logit_bias,omitempty"`
}

func toWireRequest(r Request) wireRequest {
	w := wireRequest{Request: r}
	if len(r.Sampling.LogitBias) > 0 {
		w.LogitBias = make(map[int32]string, len(r.Sampling.LogitBias))
		for t, b := range r.Sampling.LogitBias {
			w.LogitBias[t] = strconv.FormatFloat(float64(b), 'g', -1, 32)
		}
	}
	w.Request.Sampling.LogitBias = nil
	return w
}

func (w wireRequest) request() (Request, error) {
	r := w.Request
	if len(w.LogitBias) > 0 {
		r.Sampling.LogitBias = make(map[int32]float32, len(w.LogitBias))
		for t, s := range w.LogitBias {
			b, err := strconv.ParseFloat(s, 32)
			if err != nil {
				return r, fmt.Errorf("%w: logit_bias of token %d: %w", ErrInvalidRequest, t, err)
			}
			r.Sampling.LogitBias[t] = float32(b)
		}
	}
	return r, nil
}

// wireTemplate is the body of /template.
type wireTemplate struct {
	Messages     []Message `json:"messages"`
	AddAssistant bool      `json:"add_assistant"`
}

// wireTokens is the reply of /tokenize and the body of /detokenize.
type wireTokens struct {
	Tokens []int32 `json:"tokens"`
}

// encodeLine appends v to b as one JSON line, with <, > and & left as they
// are (chat markers stay readable on the socket).
func encodeLine(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// encodeStatus renders a runner's start line.
func encodeStatus(st runnerStatus) []byte {
	b, _ := json.Marshal(st) // only strings, ints and bools: cannot fail
	return append(append([]byte(statusPrefix), b...), '\n')
}
