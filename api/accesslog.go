package api

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
)

// The access log: one line per request at info (a 5xx at warn) with the
// method, route, model, status, duration, token counts (of a generation:
// also its prompt tokens read from the prefix cache), whether the client
// went away before the end, and on a 4xx/5xx the reason the answer gave.
// Handlers tell it what only they know through noteModel, noteTokens and
// noteEvents.

// accessNote is what a request's handlers tell its access line.
type accessNote struct {
	mu                 sync.Mutex
	model              string
	prompt, completion int
	counted            bool
	// cached is how many prompt tokens a generation read from the prefix
	// cache (its usage's CachedTokens).
	cached int
	// generated: a generation ran (noteEvents); finish is how its last
	// event ended it ("" until one did).
	generated bool
	finish    backends.FinishReason
	// handlerDone is closed when the handlers have returned: a generation's
	// events that nobody reads any more are then drained.
	handlerDone chan struct{}
	streams     sync.WaitGroup // noteEvents forwarders still running
}

const accessNoteKey = "modeld.access"

func noteOf(c *gin.Context) *accessNote {
	if v, ok := c.Get(accessNoteKey); ok {
		if n, ok := v.(*accessNote); ok {
			return n
		}
	}
	return nil
}

// noteModel records the model a request names, for its access line.
func noteModel(c *gin.Context, id string) {
	if n := noteOf(c); n != nil && id != "" {
		n.mu.Lock()
		n.model = id
		n.mu.Unlock()
	}
}

// noteTokens records a request's prompt and completion tokens, for its
// access line.
func noteTokens(c *gin.Context, prompt, completion int) {
	if n := noteOf(c); n != nil {
		n.setTokens(prompt, completion)
	}
}

func (n *accessNote) setTokens(prompt, completion int) {
	n.mu.Lock()
	n.prompt, n.completion, n.counted = prompt, completion, true
	n.mu.Unlock()
}

// noteEvents passes a generation's events through unchanged, recording the
// token counts of the usage they carry, and promptTokens until one does.
// Events that arrive once the handlers have returned are drained (counted,
// not delivered), so that a generation nobody reads does not block.
func noteEvents(c *gin.Context, in <-chan backends.Event, promptTokens int) <-chan backends.Event {
	n := noteOf(c)
	if n == nil {
		return in
	}
	if promptTokens > 0 {
		n.setTokens(promptTokens, 0)
	}
	n.mu.Lock()
	n.generated = true
	n.mu.Unlock()
	out := make(chan backends.Event)
	n.streams.Add(1)
	go func() {
		defer n.streams.Done()
		defer close(out)
		for ev := range in {
			if u := ev.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
				n.setTokens(u.PromptTokens, u.CompletionTokens)
				n.mu.Lock()
				n.cached = u.CachedTokens
				n.mu.Unlock()
			}
			if ev.Finish != "" {
				n.mu.Lock()
				n.finish = ev.Finish
				n.mu.Unlock()
			}
			select {
			case out <- ev:
			case <-n.handlerDone:
			}
		}
	}()
	return out
}

// streamDrainWait bounds how long the access line of a cancelled request
// waits for its generation's last events (its final token counts).
const streamDrainWait = 2 * time.Second

func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	note := &accessNote{handlerDone: make(chan struct{})}
	c.Set(accessNoteKey, note)
	rw := &reasonWriter{ResponseWriter: c.Writer}
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
		attrs = append(attrs, slog.String("reason", rw.reason()))
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(c.Request.Context(), level, "request", attrs...)
}

// reasonWriter keeps the start of an error answer's body, for the access
// line's reason.
type reasonWriter struct {
	gin.ResponseWriter
	body []byte
}

const maxReasonBody = 8 << 10

func (w *reasonWriter) keep(b []byte) {
	if w.Status() >= 400 && len(w.body) < maxReasonBody {
		w.body = append(w.body, b[:min(len(b), maxReasonBody-len(w.body))]...)
	}
}

func (w *reasonWriter) Write(b []byte) (int, error) {
	w.keep(b)
	return w.ResponseWriter.Write(b)
}

func (w *reasonWriter) WriteString(s string) (int, error) {
	w.keep([]byte(s))
	return w.ResponseWriter.WriteString(s)
}

// reason is the message of an error answer: error.message in the OpenAI
// and Anthropic shapes, error in Ollama's, else the body's text.
func (w *reasonWriter) reason() string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(w.body, &v) == nil && len(v.Error) > 0 {
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
	text := strings.TrimSpace(string(w.body))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}
