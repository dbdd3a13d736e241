package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// sseWriter writes server-sent events in OpenAI's form: "data: <json>\n\n", each
// flushed at once, ended by "data: [DONE]". It is written once per generated
// token, so an event is built in one reused buffer and goes out in one
// write, and a dialect may encode its plain token chunks by hand (fast:
// OpenAI's appendChunk), with the bytes encoding/json gives.
type sseWriter struct {
	c       *gin.Context
	started bool
	buf     []byte
	// fast appends the events it knows and reports whether it did; the
	// others, or all when fast is nil, go through enc.
	fast   func(b []byte, v any) ([]byte, bool)
	enc    *json.Encoder // into encBuf, for the events fast leaves
	encBuf bytes.Buffer
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
	w.buf = w.appendData(append(w.buf[:0], "data: "...), v)
	_, _ = w.c.Writer.Write(append(w.buf, '\n', '\n'))
	w.c.Writer.Flush()
}

// appendData appends v as json.Marshal writes it (an error event when v
// cannot be encoded).
func (w *sseWriter) appendData(b []byte, v any) []byte {
	if w.fast != nil {
		if out, ok := w.fast(b, v); ok {
			return out
		}
	}
	if w.enc == nil {
		w.enc = json.NewEncoder(&w.encBuf)
	}
	w.encBuf.Reset()
	if err := w.enc.Encode(v); err != nil {
		w.encBuf.Reset()
		_ = w.enc.Encode(gin.H{"error": gin.H{"message": err.Error(), "type": "server_error"}})
	}
	return append(b, bytes.TrimSuffix(w.encBuf.Bytes(), []byte("\n"))...)
}

func (w *sseWriter) done() {
	w.start()
	_, _ = w.c.Writer.Write([]byte("data: [DONE]\n\n"))
	w.c.Writer.Flush()
}
