package core

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
)

// ErrShuttingDown is the cause with which the daemon cancels the requests
// still running when its shutdown grace is over (the context every request
// derives from is cancelled with it): a live stream then ends with it as an
// error event, any other request gets it as a 503. A request its own client
// left is cancelled without this cause and gets nothing.
var ErrShuttingDown error = &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
	Message: "modeld is shutting down; the request was ended before it finished"}

// ShutdownCause is ErrShuttingDown when the daemon's shutdown ended ctx,
// else nil.
func ShutdownCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrShuttingDown) {
		return cause
	}
	return nil
}

// AsCut is err, or ErrShuttingDown when err is the cancellation that the
// daemon's shutdown caused (not the client's doing: say so).
func AsCut(c *gin.Context, err error) error {
	if errors.Is(err, context.Canceled) {
		if cut := ShutdownCause(c.Request.Context()); cut != nil {
			return cut
		}
	}
	return err
}

// WriteCut answers a request whose context ended: when the shutdown ended
// it, an error event on a stream already started (sse may be nil), else a
// 503. It reports whether it wrote anything; a client that left itself
// gets nothing.
func WriteCut(c *gin.Context, sse *SseWriter) bool {
	cut := ShutdownCause(c.Request.Context())
	if cut == nil {
		return false
	}
	if sse != nil && sse.Started {
		sse.Send(gin.H{"error": ToAPIError(cut)})
		return true
	}
	WriteError(c, cut)
	return true
}
