// Package lograte bounds the log lines that a repeated event writes: a
// Limiter lets a burst of lines through per key and then one per interval,
// and counts the lines it held back so that the next line says how many;
// a Handler applies one to the records of a slog.Handler that a function
// picks. A stranger who repeats a refused request cannot fill the log.
//
// It must not decide which events are limited (its callers do) or drop a
// record it was not asked to limit.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxKeys bounds the keys a Limiter tracks; further keys share one bucket.
const maxKeys = 64

// overflowKey is the bucket of the keys beyond maxKeys.
const overflowKey = "\x00overflow"

// Limiter is a token bucket per key: burst lines at once, then one per
// every. Its methods are safe for concurrent use.
type Limiter struct {
	burst int
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex // guards keys
	keys map[string]*bucket
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// NewLimiter lets burst lines per key through at once and then one per
// every. burst below 1 counts as 1.
func NewLimiter(burst int, every time.Duration) *Limiter {
	return &Limiter{burst: max(burst, 1), every: every, now: time.Now, keys: map[string]*bucket{}}
}

// Allow reports whether a line of key may be written now, and if so how
// many lines of key were held back since the last one written.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, found := l.keys[key]
	if !found && len(l.keys) >= maxKeys {
		key = overflowKey
		b, found = l.keys[key]
	}
	if !found {
		b = &bucket{tokens: float64(l.burst), last: now}
		l.keys[key] = b
	}
	if l.every > 0 {
		b.tokens = min(float64(l.burst), b.tokens+float64(now.Sub(b.last))/float64(l.every))
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}

// Handler passes records to another slog.Handler, those that match picks
// through a Limiter: a held-back record is dropped, and the next one of its
// key written carries "suppressed", the count of those dropped.
type Handler struct {
	next  slog.Handler
	lim   *Limiter
	match func(slog.Record) (key string, limited bool)
}

// NewHandler wraps next. match says whether a record is limited, and under
// which key; it is called for every record.
func NewHandler(next slog.Handler, lim *Limiter, match func(slog.Record) (key string, limited bool)) *Handler {
	return &Handler{next: next, lim: lim, match: match}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if key, limited := h.match(r); limited {
		ok, n := h.lim.Allow(key)
		if !ok {
			return nil
		}
		if n > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int("suppressed", n))
		}
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler; the copy shares the Limiter.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), lim: h.lim, match: h.match}
}

// WithGroup implements slog.Handler; the copy shares the Limiter.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), lim: h.lim, match: h.match}
}

// Attr returns the value of the record's first attribute named key.
func Attr(r slog.Record, key string) (v slog.Value, ok bool) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}
