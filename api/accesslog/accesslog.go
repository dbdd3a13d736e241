// Package accesslog is modeld's access log: one line per request at info (a
// 5xx at warn) with the method, route, model, status, duration, token
// counts (of a generation: also its prompt tokens read from the prefix
// cache), whether the client went away before the end, and on a 4xx/5xx the
// reason the answer gave. Handlers tell it what only they know through
// NoteModel, NoteTokens and NoteEvents. It imports no other api package.
package accesslog

import (
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
)

const accessNoteKey = "modeld.access"

// streamDrainWait bounds how long the access line of a cancelled request
// waits for its generation's last events (its final token counts).
const streamDrainWait = 2 * time.Second

func Middleware(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) { logRequest(log, c) }
}

// logRequest runs the request's handlers and writes its access line.
func logRequest(log *slog.Logger, c *gin.Context) {
	start := time.Now()
	note := &accessNote{handlerDone: make(chan struct{})}
	c.Set(accessNoteKey, note)
	rw := &ReasonWriter{ResponseWriter: c.Writer}
	c.Writer = rw
	c.Next()
	close(note.handlerDone)
	took := time.Since(start)
	gone := c.Request.Context().Err() != nil
	if gone {
		drained := make(chan struct{})
		go func() { note.streams.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(streamDrainWait):
		}
	}
	status := c.Writer.Status()
	route := c.FullPath()
	if route == "" {
		route = c.Request.URL.Path
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("method", c.Request.Method), slog.String("route", route))
	if p := c.Request.URL.Path; p != route {
		attrs = append(attrs, slog.String("path", p))
	}
	note.mu.Lock()
	// Cancelled: the client went away (or the daemon is stopping) before
	// the answer was complete. A generation says how it ended; a client
	// that closes the connection right after a whole answer did not cancel.
	cancelled := gone
	if note.generated && note.finish != "" {
		cancelled = note.finish == backends.FinishCancelled
	}
	if note.model != "" {
		attrs = append(attrs, slog.String("model", note.model))
	}
	attrs = append(attrs, slog.Int("status", status), slog.Duration("duration", took.Round(time.Microsecond)))
	if note.counted {
		attrs = append(attrs, slog.Int("prompt_tokens", note.prompt), slog.Int("completion_tokens", note.completion))
		if note.generated {
			attrs = append(attrs, slog.Int("cached_tokens", note.cached))
		}
	}
	note.mu.Unlock()
	attrs = append(attrs, slog.Bool("cancelled", cancelled))
	if status >= 400 {
		attrs = append(attrs, slog.String("reason", rw.Reason()))
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	log.LogAttrs(c.Request.Context(), level, "request", attrs...)
}

// ReasonWriter keeps the start of an error answer's body, for the access
// line's reason.
type ReasonWriter struct {
	gin.ResponseWriter
	Body []byte
}

const maxReasonBody = 8 << 10

func (w *ReasonWriter) keep(b []byte) {
	if w.Status() >= 400 && len(w.Body) < maxReasonBody {
		w.Body = append(w.Body, b[:min(len(b), maxReasonBody-len(w.Body))]...)
	}
}

func (w *ReasonWriter) Write(b []byte) (int, error) {
	w.keep(b)
	return w.ResponseWriter.Write(b)
}

func (w *ReasonWriter) WriteString(s string) (int, error) {
	w.keep([]byte(s))
	return w.ResponseWriter.WriteString(s)
}

// Reason is the message of an error answer: error.message in the OpenAI
// and Anthropic shapes, error in Ollama's, else the body's text.
func (w *ReasonWriter) Reason() string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(w.Body, &v) == nil && len(v.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		var str string
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(v.Error, &str) == nil && str != "":
			return str
		}
	}
	text := strings.TrimSpace(string(w.Body))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}
