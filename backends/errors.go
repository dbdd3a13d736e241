package backends

import (
	"fmt"
	"net/http"
	"time"
)

// Backend failures are typed errors of this package, so that the API maps
// them without knowing which backend failed. Each knows its HTTP meaning
// through StatusError (and, where it applies, Coder, Parameter and
// RetryAfterError); the API's one mapping function reads those methods.
// The sentinels are for errors.Is; the typed errors match them too
// (errors.Is(&BusyError{...}, ErrBusy) is true).

// StatusError is an error that says which HTTP status it means.
type StatusError interface {
	error
	HTTPStatus() int
}

// RetryAfterError is an error that says when to try again (a busy model).
type RetryAfterError interface {
	error
	RetryAfterDuration() time.Duration
}

// Coder is an error with a machine-readable code ("context_length_exceeded").
type Coder interface{ ErrorCode() string }

// Parameter is an error that names the request parameter at fault.
type Parameter interface{ ErrorParam() string }

// Kind is a sentinel error with its HTTP meaning. Compare with errors.Is.
type Kind struct {
	msg    string
	status int
	code   string
}

// NewKind returns a sentinel error with a message, an HTTP status and an
// error code ("" for none). A 503 kind asks to retry after a second.
func NewKind(msg string, status int, code string) *Kind {
	return &Kind{msg: msg, status: status, code: code}
}

func (k *Kind) Error() string     { return k.msg }
func (k *Kind) HTTPStatus() int   { return k.status }
func (k *Kind) ErrorCode() string { return k.code }

// RetryAfterDuration is one second for a 503 kind, else 0.
func (k *Kind) RetryAfterDuration() time.Duration {
	if k.status == http.StatusServiceUnavailable {
		return time.Second
	}
	return 0
}

// Sentinels shared by the backends.
var (
	// ErrInvalidRequest: a request's parameters are out of range.
	ErrInvalidRequest = NewKind("invalid request", http.StatusBadRequest, "")
	// ErrBusy: the model's slots and its queue are full.
	ErrBusy = NewKind("too many requests waiting for the model", http.StatusServiceUnavailable, "model_busy")
	// ErrContextOverflow: the prompt does not fit in the context.
	ErrContextOverflow = NewKind("context length exceeded", http.StatusBadRequest, "context_length_exceeded")
	// ErrClosed: the model was closed before or while the request ran.
	ErrClosed = NewKind("model closed", http.StatusServiceUnavailable, "model_closed")
	// ErrRunnerDied: the process that hosted the model exited.
	ErrRunnerDied = NewKind("runner process exited", http.StatusBadGateway, "model_crashed")
	// ErrRunnerStalled: the runner made no progress and was killed.
	ErrRunnerStalled = NewKind("runner stalled", http.StatusBadGateway, "model_crashed")
	// ErrNoChatTemplate: the model has no chat template.
	ErrNoChatTemplate = NewKind("model has no chat template", http.StatusBadRequest, "no_chat_template")
	// ErrTemplate: rendering the chat template failed.
	ErrTemplate = NewKind("chat template failed", http.StatusBadRequest, "chat_template_error")
	// ErrInvalidModel: the file is not a model the backend can load.
	ErrInvalidModel = NewKind("invalid model file", http.StatusUnprocessableEntity, "invalid_model")
	// ErrWrongModel: the model does not serve what was asked of it.
	ErrWrongModel = NewKind("model does not fit the task", http.StatusBadRequest, "wrong_model_type")
	// ErrNoInfill: the model's vocabulary has no fill-in-the-middle tokens.
	ErrNoInfill = NewKind("model has no fill-in-the-middle tokens", http.StatusBadRequest, "no_infill_tokens")
)

// ContextOverflowError says that the prompt and the requested completion do
// not fit in the context of one sequence. MaxTokens is 0 when the request
// left it unset (the prompt alone fills the context). The JSON names are
// llama.cpp's server's, which agents parse.
type ContextOverflowError struct {
	PromptTokens int `json:"n_prompt_tokens"`
	MaxTokens    int `json:"max_tokens,omitempty"`
	ContextSize  int `json:"n_ctx"`
	// Param names the request field that holds the prompt ("messages",
	// "prompt"); "" leaves it to the caller.
	Param string `json:"param,omitempty"`
}

func (e *ContextOverflowError) Error() string {
	if e.MaxTokens == 0 {
		return fmt.Sprintf("the prompt has %d tokens, which leaves no room for a completion in the context of %d tokens",
			e.PromptTokens, e.ContextSize)
	}
	return fmt.Sprintf("the prompt (%d tokens) plus max_tokens (%d) is %d tokens, more than the context of %d tokens",
		e.PromptTokens, e.MaxTokens, e.PromptTokens+e.MaxTokens, e.ContextSize)
}

func (e *ContextOverflowError) Is(target error) bool { return target == ErrContextOverflow }
func (e *ContextOverflowError) HTTPStatus() int      { return http.StatusBadRequest }
func (e *ContextOverflowError) ErrorCode() string    { return "context_length_exceeded" }
func (e *ContextOverflowError) ErrorParam() string   { return e.Param }

// BusyError says that a model cannot take the request now, and when to try
// again.
type BusyError struct {
	Reason     string        `json:"reason"`
	RetryAfter time.Duration `json:"retry_after"`
}

func (e *BusyError) Error() string {
	if e.Reason == "" {
		return ErrBusy.Error()
	}
	return e.Reason
}

func (e *BusyError) Is(target error) bool { return target == ErrBusy }
func (e *BusyError) HTTPStatus() int      { return http.StatusServiceUnavailable }
func (e *BusyError) ErrorCode() string    { return "model_busy" }

// RetryAfterDuration is RetryAfter, at least a second.
func (e *BusyError) RetryAfterDuration() time.Duration { return max(e.RetryAfter, time.Second) }

// BadRequestError is a request the backend refuses: a parameter out of
// range, or one it cannot honour. Param names the parameter.
type BadRequestError struct {
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Err     error  `json:"-"` // the cause, if any
}

func (e *BadRequestError) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *BadRequestError) Unwrap() error        { return e.Err }
func (e *BadRequestError) Is(target error) bool { return target == ErrInvalidRequest }
func (e *BadRequestError) HTTPStatus() int      { return http.StatusBadRequest }
func (e *BadRequestError) ErrorCode() string    { return e.Code }
func (e *BadRequestError) ErrorParam() string   { return e.Param }

// RunnerDiedError says how a runner process ended on its own (not by
// closing the model): its exit status, its cause in one line and the tail
// of its stderr (its log, never a goroutine dump).
type RunnerDiedError struct {
	Backend string `json:"backend,omitempty"`
	PID     int    `json:"pid"`
	Status  string `json:"status"` // "exit status 1", "killed by SIGKILL", ...
	// Cause is why it died, in a line: the Go runtime's reason ("panic:
	// ...", "SIGSEGV: segmentation violation"), its last output, "out of
	// memory at load", or why the daemon killed it.
	Cause  string `json:"cause,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Stalled is set when a stall watchdog killed the runner: the stall
	// timeout it exceeded.
	Stalled time.Duration `json:"stalled,omitempty"`
}

func (e *RunnerDiedError) Error() string {
	prefix := ""
	if e.Backend != "" {
		prefix = e.Backend + ": "
	}
	msg := fmt.Sprintf("%srunner process %d exited (%s)", prefix, e.PID, e.Status)
	if e.Stalled > 0 {
		msg = fmt.Sprintf("%srunner stalled: no progress for %s, killed (process %d, %s)", prefix, formatStall(e.Stalled), e.PID, e.Status)
	}
	if e.Cause != "" {
		msg += ": " + e.Cause
	}
	if e.Stderr != "" {
		msg += "; its stderr ended with:\n" + e.Stderr
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrRunnerDied) true, and
// errors.Is(err, ErrRunnerStalled) for a stalled runner.
func (e *RunnerDiedError) Unwrap() []error {
	if e.Stalled > 0 {
		return []error{ErrRunnerDied, ErrRunnerStalled}
	}
	return []error{ErrRunnerDied}
}

func (e *RunnerDiedError) HTTPStatus() int   { return http.StatusBadGateway }
func (e *RunnerDiedError) ErrorCode() string { return "model_crashed" }

// formatStall prints a stall timeout the way it was configured ("2m", "90s").
func formatStall(d time.Duration) string {
	switch {
	case d%time.Minute == 0 && d >= 2*time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// BadRequest returns a *BadRequestError for param with a formatted message.
func BadRequest(param, format string, args ...any) error {
	return &BadRequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}
