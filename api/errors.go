package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/pipelines"
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
}

func (e *Error) Error() string { return e.Message }

// RetryAfterError is implemented by errors that tell the client when to come back
// (a busy model, a load in cooldown); they become 503 with Retry-After.
type RetryAfterError interface {
	error
	RetryAfterDuration() time.Duration
}

// StatusError lets a package say which HTTP status its error means without
// importing api (e.g. a store's "not found").
type StatusError interface {
	error
	HTTPStatus() int
}

// badRequest is a 400 for a malformed or invalid request.
func badRequest(param, format string, args ...any) *Error {
	e := &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

// toAPIError maps any error to its API form: the one place that decides status
// codes. The message is bounded (clipMessage), so no error echoes a huge input.
func toAPIError(err error) *Error {
	e := mapError(err)
	if len(e.Message) > maxErrorMessage {
		c := *e
		c.Message = clipMessage(e.Message)
		e = &c
	}
	return e
}

func mapError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var cl *llama.ContextLengthError
	if errors.As(err, &cl) {
		e := badRequest("messages", "%s", cl.Error())
		e.Code = "context_length_exceeded"
		return e
	}
	var tl *cache.TooLargeError
	if errors.As(err, &tl) {
		return &Error{Status: http.StatusInsufficientStorage, Type: "server_error", Code: "model_too_large", Message: err.Error()}
	}
	if d, ok := cache.RetryAfter(err); ok {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy", Message: err.Error(), RetryAfter: d}
	}
	switch {
	case errors.Is(err, llama.ErrBusy):
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy", Message: err.Error(), RetryAfter: time.Second}
	case errors.Is(err, llama.ErrNoChatTemplate):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "no_chat_template",
			Message: err.Error() + "; use /v1/completions with a raw prompt"}
	case errors.Is(err, llama.ErrTemplate):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "chat_template_error",
			Message: err.Error()}
	case errors.Is(err, llama.ErrInvalidRequest):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()}
	case errors.Is(err, cache.ErrDied):
		return &Error{Status: http.StatusBadGateway, Type: "server_error", Code: "model_crashed", Message: err.Error()}
	case errors.Is(err, pipelines.ErrInvalidInput):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()}
	case errors.Is(err, pipelines.ErrWrongModel):
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_model_type", Message: err.Error()}
	case errors.Is(err, pipelines.ErrBusy), errors.Is(err, pipelines.ErrBatcherClosed):
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy", Message: err.Error(), RetryAfter: time.Second}
	}
	var ra RetryAfterError
	if errors.As(err, &ra) {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "model_busy",
			Message: err.Error(), RetryAfter: ra.RetryAfterDuration()}
	}
	var se StatusError
	if errors.As(err, &se) {
		st := se.HTTPStatus()
		typ := "invalid_request_error"
		if st >= 500 {
			typ = "server_error"
		}
		code := any(nil)
		if st == http.StatusNotFound {
			code = "model_not_found"
		}
		return &Error{Status: st, Type: typ, Code: code, Message: err.Error()}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Type: "server_error", Message: "request cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Type: "server_error", Message: err.Error()}
	}
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// writeError sends err as an OpenAI error object.
func writeError(c *gin.Context, err error) {
	e := toAPIError(asCut(c, err))
	if e.RetryAfter > 0 {
		secs := int(e.RetryAfter.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		c.Header("Retry-After", strconv.Itoa(secs))
	}
	c.AbortWithStatusJSON(e.Status, gin.H{"error": e})
}
