package core

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// SseWriter writes server-sent events in OpenAI's form: "data: <json>\n\n", each
// flushed at once, ended by "data: [DONE]". It is written once per generated
// token, so an event is built in one reused buffer and goes out in one
// write, and a dialect may encode its plain token chunks by hand (fast:
// OpenAI's AppendChunk), with the bytes encoding/json gives.
type SseWriter struct {
	C       *gin.Context
	Started bool
	Buf     []byte
	// Fast appends the events it knows and reports whether it did; the
	// others, or all when fast is nil, go through enc.
	Fast   func(b []byte, v any) ([]byte, bool)
	enc    *json.Encoder // into encBuf, for the events fast leaves
	encBuf bytes.Buffer
}

func NewSSE(c *gin.Context) *SseWriter { return &SseWriter{C: c} }

func (w *SseWriter) Start() {
	if w.Started {
		return
	}
	w.Started = true
	h := w.C.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.C.Status(http.StatusOK)
}

func (w *SseWriter) Send(v any) {
	w.Start()
	w.Buf = w.AppendData(append(w.Buf[:0], "data: "...), v)
	_, _ = w.C.Writer.Write(append(w.Buf, '\n', '\n'))
	w.C.Writer.Flush()
}

// AppendData appends v as json.Marshal writes it (an error event when v
// cannot be encoded).
func (w *SseWriter) AppendData(b []byte, v any) []byte {
	if w.Fast != nil {
		if out, ok := w.Fast(b, v); ok {
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

func (w *SseWriter) Done() {
	w.Start()
	_, _ = w.C.Writer.Write([]byte("data: [DONE]\n\n"))
	w.C.Writer.Flush()
}
