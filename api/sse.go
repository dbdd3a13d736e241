package api

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// sseWriter writes server-sent events in OpenAI's form: "data: <json>\n\n", each
// flushed at once, ended by "data: [DONE]".
type sseWriter struct {
	c       *gin.Context
	started bool
}

func newSSE(c *gin.Context) *sseWriter { return &sseWriter{c: c} }

func (w *sseWriter) start() {
	if w.started {
		return
	}
	w.started = true
	h := w.c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.c.Status(http.StatusOK)
}

func (w *sseWriter) send(v any) {
	w.start()
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(gin.H{"error": gin.H{"message": err.Error(), "type": "server_error"}})
	}
	_, _ = w.c.Writer.Write(append(append([]byte("data: "), b...), '\n', '\n'))
	w.c.Writer.Flush()
}

func (w *sseWriter) done() {
	w.start()
	_, _ = w.c.Writer.Write([]byte("data: [DONE]\n\n"))
	w.c.Writer.Flush()
}
