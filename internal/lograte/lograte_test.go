package lograte

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestLimiter: a burst goes through, then one line per interval, and the
// line after a pause counts the ones held back; keys do not share a budget.
func TestLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(2, time.Minute)
		for i, want := range []bool{true, true, false, false} {
			if ok, _ := l.Allow("a"); ok != want {
				t.Errorf("line %d of a: allowed %v, want %v", i, ok, want)
			}
		}
		if ok, _ := l.Allow("b"); !ok {
			t.Error("the first line of b was held back by a's")
		}
		time.Sleep(time.Minute)
		if ok, n := l.Allow("a"); !ok || n != 2 {
			t.Errorf("a minute later: allowed %v with %d suppressed, want true with 2", ok, n)
		}
		if ok, _ := l.Allow("a"); ok {
			t.Error("a second line right after the refilled one was allowed")
		}
	})
}

// TestLimiterKeysBounded: a stranger who varies the key gets no more than
// maxKeys+1 buckets' worth of lines.
func TestLimiterKeysBounded(t *testing.T) {
	l := NewLimiter(1, time.Hour)
	allowed := 0
	for i := range 10000 {
		if ok, _ := l.Allow(strings.Repeat("k", i%5000+1)); ok {
			allowed++
		}
	}
	if allowed != maxKeys+1 {
		t.Errorf("10000 lines under 5000 keys: %d allowed, want %d", allowed, maxKeys+1)
	}
	if len(l.keys) != maxKeys+1 {
		t.Errorf("%d buckets kept, want %d", len(l.keys), maxKeys+1)
	}
}

// TestHandler: matched records are limited and the next one written says
// how many were dropped; the others all pass, with the handler's attrs.
func TestHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		h := NewHandler(slog.NewTextHandler(&buf, nil), NewLimiter(1, time.Second), func(r slog.Record) (string, bool) {
			v, ok := Attr(r, "path")
			return "k", r.Message == "refused" && ok && v.String() == "/metrics"
		})
		log := slog.New(h).With("component", "api")
		for range 100 {
			log.Info("refused", "path", "/metrics")
			log.Info("refused", "path", "/v1/models")
		}
		time.Sleep(time.Second)
		log.Info("refused", "path", "/metrics")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		var scrapes, others int
		for _, l := range lines {
			if !strings.Contains(l, "component=api") {
				t.Errorf("line without the handler's attrs: %s", l)
			}
			switch {
			case strings.Contains(l, "path=/metrics"):
				scrapes++
			case strings.Contains(l, "path=/v1/models"):
				others++
			}
		}
		if scrapes != 2 || others != 100 {
			t.Errorf("%d /metrics and %d other lines, want 2 and 100", scrapes, others)
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "suppressed=99") {
			t.Errorf("the line after the pause = %s, want suppressed=99", last)
		}
	})
}
