package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/api/accesslog"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// syncBuffer is a log destination that tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggedServer serves models with its log (JSON, info) in the returned buffer.
func loggedServer(t *testing.T, models map[string]cache.Instance, tasks map[string]string) (*Server, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if _, ok := models[id]; !ok {
			return cache.Spec{}, fmt.Errorf("model %s: %w", id, errNotFound)
		}
		return cache.Spec{ID: id, Task: tasks[id]}, nil
	}
	load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) { return models[spec.ID], nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c, Log: log}), buf
}

// accessRecords returns the access lines in a JSON log, failing on a record
// with a key twice.
func accessRecords(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		checkUniqueKeys(t, sc.Bytes())
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Bytes())
		}
		if rec["msg"] == "request" {
			out = append(out, rec)
		}
	}
	return out
}

// checkUniqueKeys fails when a JSON object's top level has a key twice.
func checkUniqueKeys(t *testing.T, line []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil { // {
		t.Fatalf("not a JSON object: %s", line)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		if seen[k] {
			t.Errorf("key %q twice in %s", k, line)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
}

// One access line per request at info: method, route, model, status,
// duration, token counts (non-streamed, streamed and a pipeline; a
// generation's prompt tokens read from the prefix cache), whether
// the client went away, and the reason of a 4xx.
func TestAccessLog(t *testing.T) {
	chat := &fakeChat{pieces: []string{"a", "b", "c"}, finish: backends.FinishStop, template: true}
	slow := &fakeChat{template: true, finish: backends.FinishStop, tokenizeStarted: make(chan struct{})}
	s, logs := loggedServer(t, map[string]cache.Instance{
		"m":     chat,
		"slow":  slow,
		"embed": &fakeInstance{p: &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}, device: "cpu"},
	}, map[string]string{"m": "chat", "slow": "chat", "embed": "embed"})

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	if w := post(t, s, "/v1/chat/completions", `{"model":"m",`+msgs+`}`); w.Code != 200 {
		t.Fatalf("chat: %d %s", w.Code, w.Body)
	}
	if w := post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,`+msgs+`}`); w.Code != 200 {
		t.Fatalf("stream: %d %s", w.Code, w.Body)
	}
	if w := post(t, s, "/v1/embeddings", `{"model":"embed","input":["x","y"]}`); w.Code != 200 {
		t.Fatalf("embeddings: %d %s", w.Code, w.Body)
	}
	s.RegisterOllama(core.ModelsOptions{})
	if w := post(t, s, "/api/embed", `{"model":"embed","input":["x","y"]}`); w.Code != 200 {
		t.Fatalf("ollama embed: %d %s", w.Code, w.Body)
	}
	if w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":"hi"}`); w.Code != 400 {
		t.Fatalf("bad body: %d %s", w.Code, w.Body)
	}
	if w := post(t, s, "/v1/nothing", `{}`); w.Code != 404 {
		t.Fatalf("no route: %d %s", w.Code, w.Body)
	}
	// A client that goes away while its request is in the work.
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "POST", "http://localhost/v1/chat/completions",
		strings.NewReader(`{"model":"slow",`+msgs+`}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() { defer close(done); s.Handler().ServeHTTP(httptest.NewRecorder(), req) }()
	<-slow.tokenizeStarted
	cancel()
	<-done

	recs := accessRecords(t, logs.String())
	if len(recs) != 7 {
		t.Fatalf("%d access lines for 7 requests:\n%s", len(recs), logs)
	}
	for i, want := range []map[string]any{
		{"level": "INFO", "method": "POST", "route": "/v1/chat/completions", "model": "m", "status": 200.0,
			"prompt_tokens": float64(len("<user>hi")), "completion_tokens": 3.0, "cached_tokens": 2.0, "cancelled": false},
		{"route": "/v1/chat/completions", "model": "m", "status": 200.0, "completion_tokens": 3.0, "cached_tokens": 2.0, "cancelled": false},
		{"route": "/v1/embeddings", "model": "embed", "status": 200.0, "prompt_tokens": 6.0, "completion_tokens": 0.0},
		{"route": "/api/embed", "model": "embed", "status": 200.0, "prompt_tokens": 6.0, "completion_tokens": 0.0},
		{"route": "/v1/chat/completions", "status": 400.0, "cancelled": false},
		{"level": "INFO", "route": "/v1/nothing", "status": 404.0, "reason": "no route for POST /v1/nothing"},
		{"route": "/v1/chat/completions", "model": "slow", "cancelled": true},
	} {
		for k, v := range want {
			if recs[i][k] != v {
				t.Errorf("access line %d: %s = %v, want %v\n%v", i, k, recs[i][k], v, recs[i])
			}
		}
		if _, ok := recs[i]["duration"]; !ok {
			t.Errorf("access line %d has no duration: %v", i, recs[i])
		}
		if _, ok := recs[i]["reason"]; ok != (recs[i]["status"].(float64) >= 400) {
			t.Errorf("access line %d: a reason only on an error answer: %v", i, recs[i])
		}
	}
	for _, i := range []int{2, 3} {
		if _, ok := recs[i]["cached_tokens"]; ok {
			t.Errorf("access line %d: cached_tokens on a request that generated nothing: %v", i, recs[i])
		}
	}
	if r, _ := recs[4]["reason"].(string); !strings.Contains(r, "messages") {
		t.Errorf("the 400's reason %q does not name the field", r)
	}
}

// ReasonWriter reads the message of each dialect's error shape.
func TestAccessReason(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"bad thing","type":"invalid_request_error"}}`: "bad thing",
		`{"type":"error","error":{"type":"x","message":"anthropic"}}`:      "anthropic",
		`{"error":"ollama says"}`: "ollama says",
		`plain text`:              "plain text",
	} {
		w := &accesslog.ReasonWriter{Body: []byte(body)}
		if got := w.Reason(); got != want {
			t.Errorf("reason of %s = %q, want %q", body, got, want)
		}
	}
}
