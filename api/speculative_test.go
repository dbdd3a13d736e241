package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// speculativeCases are a request's speculative field (the JSON text to
// splice in, "" for absent) and what the backend must be asked: nil keeps
// the model's setting.
var speculativeCases = []struct {
	field string
	want  *bool
}{{"", nil}, {`"speculative":true,`, ptrTo(true)}, {`"speculative":false,`, ptrTo(false)}}

func ptrTo[T any](v T) *T { return &v }

func checkSpeculative(t *testing.T, route, field string, got backends.Request, want *bool) {
	t.Helper()
	switch {
	case want == nil && got.Speculative != nil:
		t.Errorf("%s with %q: the backend was asked speculative=%v, want the model's setting (nil)", route, field, *got.Speculative)
	case want != nil && (got.Speculative == nil || *got.Speculative != *want):
		t.Errorf("%s with %q: the backend was asked speculative=%v, want %v", route, field, got.Speculative, *want)
	}
}

// TestOpenAISpeculative: chat completions' and completions' top-level
// speculative reaches the backend request; absent leaves the model's setting.
func TestOpenAISpeculative(t *testing.T) {
	m := &fakeChat{pieces: []string{"ok"}, finish: backends.FinishStop, template: true, gotReq: make(chan backends.Request, 1)}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	for _, tc := range speculativeCases {
		for _, r := range []struct{ route, body string }{
			{"/v1/chat/completions", `{%s"model":"m","messages":[{"role":"user","content":"hi"}]}`},
			{"/v1/completions", `{%s"model":"m","prompt":"hello"}`},
		} {
			if w := post(t, s, r.route, fmt.Sprintf(r.body, tc.field)); w.Code != 200 {
				t.Fatalf("%s: %d %s", r.route, w.Code, w.Body)
			}
			checkSpeculative(t, r.route, tc.field, <-m.gotReq, tc.want)
		}
	}
}

// TestAnthropicSpeculative: the Messages request's top-level speculative
// (modeld's own) reaches the backend request.
func TestAnthropicSpeculative(t *testing.T) {
	m := &anthropicFake{script: []backends.Event{atext("ok"), adone(backends.FinishStop, 1)}, got: make(chan backends.Request, 1)}
	s := anthropicServer(t, m)
	for _, tc := range speculativeCases {
		body := fmt.Sprintf(`{%s"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, tc.field)
		if w := postAnthropic(t, s, "/v1/messages", body); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		checkSpeculative(t, "/v1/messages", tc.field, <-m.got, tc.want)
	}
}

// TestResponsesSpeculative: the Responses request's top-level speculative
// reaches the backend request.
func TestResponsesSpeculative(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	for _, tc := range speculativeCases {
		if w := post(t, s, "/v1/responses", fmt.Sprintf(`{%s"model":"m","input":"hi"}`, tc.field)); w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		checkSpeculative(t, "/v1/responses", tc.field, m.last(t), tc.want)
	}
}

// TestOllamaSpeculative: options.speculative of /api/chat and /api/generate
// reaches the backend request, and a value that is not a boolean is refused
// naming the option.
func TestOllamaSpeculative(t *testing.T) {
	e := ollamaServer(t, "")
	for _, tc := range speculativeCases {
		opt := `"options":{` + tc.field + `"seed":1}`
		for _, r := range []struct{ route, body string }{
			{"/api/chat", `{"model":"org/chat","stream":false,"messages":[{"role":"user","content":"hi"}],%s}`},
			{"/api/generate", `{"model":"org/chat","stream":false,"prompt":"hi",%s}`},
		} {
			if w := e.call(t, "POST", r.route, fmt.Sprintf(r.body, opt)); w.Code != 200 {
				t.Fatalf("%s: %d %s", r.route, w.Code, w.Body)
			}
			req, _ := e.chat.last(t)
			checkSpeculative(t, r.route, tc.field, req, tc.want)
		}
	}
	w := e.call(t, "POST", "/api/generate", `{"model":"org/chat","stream":false,"prompt":"hi","options":{"speculative":"yes"}}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "options.speculative must be a boolean") {
		t.Errorf("options.speculative \"yes\": %d %s", w.Code, w.Body)
	}
}
