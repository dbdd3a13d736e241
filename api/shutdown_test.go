package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/core"
)

// TestShutdownCut: a request that the daemon's shutdown ended is told so
// (a 503 with code shutting_down, or an error event on a started stream,
// and a cancellation error on its way out becomes that 503 too); one that
// its client left gets nothing written.
func TestShutdownCut(t *testing.T) {
	gin.SetMode(gin.TestMode)
	cases := []struct {
		name    string
		cause   error // nil: the client went away
		handler func(c *gin.Context)
		status  int
		body    string
	}{
		{"plain request", core.ErrShuttingDown, func(c *gin.Context) { core.WriteCut(c, nil) }, 503, `"code":"shutting_down"`},
		{"cancellation error", core.ErrShuttingDown, func(c *gin.Context) {
			core.WriteError(c, fmt.Errorf("embed: %w", context.Canceled))
		}, 503, `"code":"shutting_down"`},
		{"live stream", core.ErrShuttingDown, func(c *gin.Context) {
			sse := core.NewSSE(c)
			sse.Send(gin.H{"piece": 1})
			core.WriteCut(c, sse)
		}, 200, "data: {\"piece\":1}\n\ndata: {\"error\":{\"message\":\"modeld is shutting down"},
		{"client gone", nil, func(c *gin.Context) {
			if core.WriteCut(c, nil) {
				t.Error("writeCut wrote to a client that left")
			}
		}, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := gin.New()
			r.GET("/", tc.handler)
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) || (tc.body == "" && w.Body.Len() > 0) {
				t.Fatalf("answer %d %q, want %d with %q", w.Code, w.Body, tc.status, tc.body)
			}
			if tc.status == 200 && tc.body != "" && strings.Contains(w.Body.String(), "[DONE]") {
				t.Errorf("a cut stream must not claim [DONE]: %q", w.Body)
			}
		})
	}
}
