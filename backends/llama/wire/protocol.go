package wire

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
// per event; a request with N > 1 has one final event per choice (Index
// names it), and a token's Logprobs, when asked for, ride on its event. A
// failed call answers a non-2xx status with an Error.
//
// The runner reports its start on stdout with one line that begins with
// StatusPrefix: {"ready":true} once it serves, or {"error":...} when it
// could not load the model. Everything else it prints goes to stderr.
const (
	RouteHealth     = "/health"
	RouteInfo       = "/info"
	RouteStats      = "/stats"
	RouteTokenize   = "/tokenize"   // ?add_special=&parse_special=, body: text
	RouteDetokenize = "/detokenize" // ?render_special=, body: {"tokens":[...]}
	RoutePiece      = "/piece"      // ?token=&render_special=
	RouteTemplate   = "/template"   // body: Template
	// RouteGenerate streams a generation: body Request. A request with
	// Text and no Prompt is tokenized there, special tokens parsed and the
	// vocabulary's added, and its answer's HeaderPromptTokens says how many
	// tokens that gave.
	RouteGenerate = "/generate"
	// HeaderPromptTokens is the prompt's token count in /generate's answer.
	HeaderPromptTokens = "Modeld-Prompt-Tokens"
	// RouteChatPrompt renders and tokenizes a conversation in one step
	// (message text as text): body ChatPrompt, answer Tokens.
	RouteChatPrompt = "/chat-prompt"

	StatusPrefix = "modeld-runner-status "

	// MaxCallBody bounds a request body the runner reads (a prompt of a
	// million tokens is ~8 MB of JSON).
	MaxCallBody = 64 << 20
)

// Status is the one start line of a runner on stdout.
type Status struct {
	Ready bool   `json:"ready,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// Error carries an engine error across the socket: its message, the
// sentinels it wraps (by name) and the typed errors of package backends it
// holds, with their fields (a context overflow's numbers, a busy model's
// retry-after, a refused parameter), so that errors.Is and errors.As give
// the same answers on both ends.
type Error struct {
	Message string   `json:"message"`
	Kinds   []string `json:"kinds,omitempty"`
	// Context is set for a *backends.ContextOverflowError.
	Context    *backends.ContextOverflowError `json:"context,omitempty"`
	Busy       *backends.BusyError            `json:"busy,omitempty"`
	BadRequest *backends.BadRequestError      `json:"bad_request,omitempty"`
	Died       *backends.RunnerDiedError      `json:"died,omitempty"`
	Images     *backends.ImageInputError      `json:"images,omitempty"`
}

// errorKinds names the sentinels that survive the trip, so callers can use
// errors.Is whether the model runs in-process or in a runner.
var errorKinds = []struct {
	name string
	err  error
}{
	{"invalid_request", backends.ErrInvalidRequest},
	{"busy", backends.ErrBusy},
	{"context_overflow", backends.ErrContextOverflow},
	{"wrong_model", backends.ErrWrongModel},
	{"runner_stalled", backends.ErrRunnerStalled},
	{"closed", backends.ErrClosed},
	{"invalid_model", backends.ErrInvalidModel},
	{"no_chat_template", backends.ErrNoChatTemplate},
	{"template", backends.ErrTemplate},
	{"decode", ErrDecode},
	{"not_initialized", ErrNotInitialized},
	{"runner_exited", backends.ErrRunnerDied},
	{"canceled", context.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded},
}

// FromError describes err for the other end; nil for nil.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	w := &Error{Message: err.Error()}
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
	var ie *backends.ImageInputError
	if errors.As(err, &ie) {
		c := *ie
		w.Images = &c
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			w.Kinds = append(w.Kinds, k.name)
		}
	}
	return w
}

// ToError rebuilds the error: same message, and errors.Is / errors.As give
// the same answers as for the original. Kinds it does not know are dropped.
func (w *Error) ToError() error {
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
	if w.Images != nil {
		c := *w.Images
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

// Event is a backends.Event on the wire: Err travels as an Error.
type Event struct {
	backends.Event
	Err *Error `json:"Err,omitempty"`
}

// FromEvent is ev for the wire.
func FromEvent(ev backends.Event) Event {
	return Event{Event: ev, Err: FromError(ev.Err)}
}

// ToEvent is the event w carries.
func (w Event) ToEvent() backends.Event {
	ev := w.Event
	ev.Err = w.Err.ToError()
	return ev
}

// Request is a backends.Request on the wire. JSON has no infinities, and a logit
// bias of -Inf is how a token is banned, so the biases travel as strings
// ("-Inf", "2.5") beside the rest of the request.
type Request struct {
	backends.Request
	LogitBias map[int32]string `json:"logit_bias,omitempty"`
}

// FromRequest is r for the wire.
func FromRequest(r backends.Request) Request {
	w := Request{Request: r}
	if len(r.Sampling.LogitBias) > 0 {
		w.LogitBias = make(map[int32]string, len(r.Sampling.LogitBias))
		for t, b := range r.Sampling.LogitBias {
			w.LogitBias[t] = strconv.FormatFloat(float64(b), 'g', -1, 32)
		}
	}
	w.Request.Sampling.LogitBias = nil
	return w
}

// ToRequest is the request w carries; a malformed logit bias is an
// ErrInvalidRequest.
func (w Request) ToRequest() (backends.Request, error) {
	r := w.Request
	if len(w.LogitBias) > 0 {
		r.Sampling.LogitBias = make(map[int32]float32, len(w.LogitBias))
		for t, s := range w.LogitBias {
			b, err := strconv.ParseFloat(s, 32)
			if err != nil {
				return r, fmt.Errorf("%w: logit_bias of token %d: %w", backends.ErrInvalidRequest, t, err)
			}
			r.Sampling.LogitBias[t] = float32(b)
		}
	}
	return r, nil
}

// Template is the body of /template.
type Template struct {
	Messages     []backends.Message `json:"messages"`
	AddAssistant bool               `json:"add_assistant"`
}

// ChatPrompt is the body of /chat-prompt.
type ChatPrompt struct {
	Messages     []backends.Message `json:"messages"`
	Tools        []backends.Tool    `json:"tools,omitempty"`
	AddAssistant bool               `json:"add_assistant"`
	// Vars are extra chat-template variables (backends.TemplateVars).
	Vars map[string]any `json:"vars,omitempty"`
}

// Tokens is the reply of /tokenize and /chat-prompt, and the body of
// /detokenize.
type Tokens struct {
	Tokens []int32 `json:"tokens"`
}

// EncodeLine appends v to b as one JSON line, with <, > and & left as they
// are (chat markers stay readable on the socket).
func EncodeLine(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// EncodeStatus renders a runner's start line.
func EncodeStatus(st Status) []byte {
	b, _ := json.Marshal(st) // only strings, ints and bools: cannot fail
	return append(append([]byte(StatusPrefix), b...), '\n')
}
