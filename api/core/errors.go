package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// Error is an API error in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type Error struct {
	Status     int           `json:"-"`
	Message    string        `json:"message"`
	Type       string        `json:"type"`
	Param      *string       `json:"param"`
	Code       any           `json:"code"`
	RetryAfter time.Duration `json:"-"`
	// NPromptTokens and NCtx are set on a context_length_exceeded error
	// that counted the prompt: its tokens and the context's size (the
	// fields of llama.cpp's server, which agents read to budget).
	NPromptTokens *int `json:"n_prompt_tokens,omitempty"`
	NCtx          *int `json:"n_ctx,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// RetryAfterError is implemented by errors that tell the client when to come back
// (a busy model, a load in cooldown); they become 503 with Retry-After.
type RetryAfterError = backends.RetryAfterError

// StatusError lets a package say which HTTP status its error means without
// importing api (e.g. a store's "not found", a backend's typed errors). An
// error that also has ErrorCode() string and ErrorParam() string gives the
// error object's code and param.
type StatusError = backends.StatusError

// BadRequest is a 400 for a malformed or invalid request.
func BadRequest(param, format string, args ...any) *Error {
	e := &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

// ToAPIError maps any error to its API form: the one place that decides status
// codes. The message is bounded (ClipMessage), so no error echoes a huge input.
func ToAPIError(err error) *Error {
	e := mapError(err)
	if len(e.Message) > MaxErrorMessage {
		c := *e
		c.Message = ClipMessage(e.Message)
		e = &c
	}
	return e
}

func mapError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var tl *cache.TooLargeError
	if errors.As(err, &tl) {
		return &Error{Status: http.StatusInsufficientStorage, Type: "server_error", Code: "model_too_large", Message: err.Error()}
	}
	if d, ok := cache.RetryAfter(err); ok {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy", Message: err.Error(), RetryAfter: d}
	}
	switch {
	case errors.Is(err, backends.ErrNoChatTemplate):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "no_chat_template",
			Message: err.Error() + "; use /v1/completions with a raw prompt"}
	case errors.Is(err, cache.ErrDied):
		return &Error{Status: http.StatusBadGateway, Type: "server_error", Code: "model_crashed", Message: err.Error()}
	}
	if e := statusError(err); e != nil {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Type: "server_error", Message: "request cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Type: "server_error", Message: err.Error()}
	}
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// statusError maps an error that carries its HTTP meaning (StatusError, and
// RetryAfterError for a 503): the status, code, param and retry-after come
// from the error's own methods. nil when err has none.
func statusError(err error) *Error {
	var se StatusError
	if !errors.As(err, &se) {
		var ra RetryAfterError
		if errors.As(err, &ra) {
			return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy",
				Message: err.Error(), RetryAfter: max(ra.RetryAfterDuration(), time.Second)}
		}
		return nil
	}
	st := se.HTTPStatus()
	e := &Error{Status: st, Type: "invalid_request_error", Message: err.Error()}
	var co *backends.ContextOverflowError
	if errors.As(err, &co) {
		n, ctx := co.PromptTokens, co.ContextSize
		e.NPromptTokens, e.NCtx = &n, &ctx
	}
	if st >= 500 {
		e.Type = "server_error"
	}
	if c, ok := se.(backends.Coder); ok && c.ErrorCode() != "" {
		e.Code = c.ErrorCode()
	} else if st == http.StatusNotFound {
		e.Code = "model_not_found"
	}
	var p backends.Parameter
	if errors.As(err, &p) && p.ErrorParam() != "" {
		param := p.ErrorParam()
		e.Param = &param
	}
	if st == http.StatusServiceUnavailable {
		e.RetryAfter = time.Second
		var ra RetryAfterError
		if errors.As(err, &ra) && ra.RetryAfterDuration() > 0 {
			e.RetryAfter = ra.RetryAfterDuration()
		}
	}
	return e
}

// WriteError sends err as an OpenAI error object, or in the shape of the
// dialect whose path the request asked for (ShapeErrors: an unknown route, a
// wrong method, a panic under /api/ or /v1/messages).
func WriteError(c *gin.Context, err error) {
	v, _ := c.Get(errorShapeKey)
	shape, _ := v.(func(*Error) any)
	if shape == nil {
		shape = openAIShape
	}
	WriteErrorAs(c, err, shape)
}

// WriteErrorAs sends err in a dialect's error shape: shape builds the body
// from the one mapping (ToAPIError), so every dialect has the same statuses,
// Retry-After and bounded messages.
func WriteErrorAs(c *gin.Context, err error, shape func(*Error) any) {
	e := ToAPIError(AsCut(c, err))
	if e.RetryAfter > 0 {
		secs := int(e.RetryAfter.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		c.Header("Retry-After", strconv.Itoa(secs))
	}
	c.AbortWithStatusJSON(e.Status, shape(e))
}
