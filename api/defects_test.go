package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// TestInfillOneSlot: /api/generate with a suffix on a model with one slot,
// several at once, are each answered: the infill holds the slot it was
// granted and asks for no second one. The ceiling only bounds a hang.
func TestInfillOneSlot(t *testing.T) {
	e := ollamaServer(t, "")
	e.chat.slots = 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Go(func() {
			req := httptest.NewRequestWithContext(ctx, "POST", "http://localhost/api/generate",
				strings.NewReader(`{"model":"org/chat","prompt":"def f():","suffix":"  return r","stream":false}`))
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			e.s.Handler().ServeHTTP(w, req)
			codes[i] = w.Code
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Errorf("infill %d: status %d", i, code)
		}
	}
}

// TestEmptyCompletionPrompt: an empty prompt on /v1/completions is a 400
// naming prompt, and no model is loaded for it.
func TestEmptyCompletionPrompt(t *testing.T) {
	s, loads := limitServer(t, map[string]cache.Instance{"chat": &fakeChat{template: true, finish: "stop"}}, Options{})
	for _, body := range []string{`{"model":"chat","prompt":""}`, `{"model":"chat","prompt":[""]}`} {
		wantError(t, post(t, s, "/v1/completions", body), http.StatusBadRequest, "prompt", "prompt is empty")
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("%d loads for an empty prompt", n)
	}
}

// TestContextOverflowParam: a context overflow from the backend names the
// route's prompt field: prompt on /v1/completions, messages on chat
// completions, input on responses.
func TestContextOverflowParam(t *testing.T) {
	over := &backends.ContextOverflowError{PromptTokens: 70, ContextSize: 64}
	s := chatServer(t, map[string]cache.Instance{"m": &fakeChat{template: true, err: over}})
	for path, tc := range map[string]struct{ body, param string }{
		"/v1/completions":      {`{"model":"m","prompt":"hello"}`, "prompt"},
		"/v1/chat/completions": {`{"model":"m","messages":[{"role":"user","content":"hello"}]}`, "messages"},
		"/v1/responses":        {`{"model":"m","input":"hello"}`, "input"},
	} {
		e := wantError(t, post(t, s, path, tc.body), http.StatusBadRequest, tc.param)
		if e.Error.Code != "context_length_exceeded" {
			t.Errorf("%s: code %v", path, e.Error.Code)
		}
	}
}

// TestSeveralProblemsParam: a 400 that lists several problems names the
// first of them in the request's field order, every time.
func TestSeveralProblemsParam(t *testing.T) {
	s := chatServer(t, map[string]cache.Instance{"m": &fakeChat{template: true, finish: "stop"}})
	body := `{"model":"m","messages":[{"role":"user","content":"x"}],"presence_penalty":5,"frequency_penalty":5}`
	for range 20 {
		wantError(t, post(t, s, "/v1/chat/completions", body), http.StatusBadRequest, "presence_penalty", "frequency_penalty")
	}
}

// TestJoinBadRequestsOfBackendErrors: joining 400s of other types (a
// backend's BadRequestError first) neither panics nor loses the param.
func TestJoinBadRequestsOfBackendErrors(t *testing.T) {
	err := core.JoinBadRequests([]error{&backends.BadRequestError{Param: "tools", Message: "tools[0] is bad"}, core.BadRequest("n", "n is bad")})
	var e *core.Error
	if !errors.As(err, &e) || e.Param == nil || *e.Param != "tools" || !strings.Contains(e.Message, "tools[0] is bad; n is bad") {
		t.Fatalf("joined: %#v", err)
	}
	err = core.JoinBadRequests([]error{errors.New("plain"), core.BadRequest("n", "n is bad")})
	if !errors.As(err, &e) || e.Param == nil || *e.Param != "n" {
		t.Fatalf("joined with a plain error: %#v", err)
	}
}

// TestAnthropicRanges: Anthropic's sampling errors give Anthropic's ranges
// (temperature 0 to 1), never OpenAI's.
func TestAnthropicRanges(t *testing.T) {
	s := anthropicServer(t, &anthropicFake{script: []backends.Event{adone(backends.FinishStop, 1)}})
	for _, tc := range []struct{ field, value, want string }{
		{"temperature", "1.5", "[0, 1]"}, {"temperature", "3", "[0, 1]"}, {"temperature", "-1", "[0, 1]"},
		{"top_p", "2", "[0, 1]"},
	} {
		w := post(t, s, "/v1/messages", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"`+tc.field+`":`+tc.value+`}`)
		var e anthropicError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != 400 {
			t.Fatalf("%s %s: %d %s", tc.field, tc.value, w.Code, w.Body)
		}
		if !strings.Contains(e.Error.Message, tc.want) || strings.Contains(e.Error.Message, "[0, 2]") {
			t.Errorf("%s %s: %q, want the range %s", tc.field, tc.value, e.Error.Message, tc.want)
		}
	}
}

// TestGenerationErrorNeverWrapsNil: a final event that says it failed
// without an error is still an error, and it wraps nothing nil.
func TestGenerationErrorNeverWrapsNil(t *testing.T) {
	if err := core.GenerationError(backends.Event{Done: true, Finish: backends.FinishStop}); err != nil {
		t.Fatalf("a stop is %v", err)
	}
	err := core.GenerationError(backends.Event{Done: true, Finish: backends.FinishError})
	if err == nil || strings.Contains(err.Error(), "%!") || errors.Unwrap(err) == nil && strings.Contains(err.Error(), "nil") {
		t.Fatalf("a failure without Err: %v", err)
	}
	cause := errors.New("decode failed")
	if err := core.GenerationError(backends.Event{Done: true, Finish: backends.FinishError, Err: cause}); !errors.Is(err, cause) {
		t.Fatalf("a failure with Err: %v", err)
	}
}

// TestResponsesReasoningTokens: reasoning_tokens is the backend's count of
// reasoning tokens, not the number of events that carried reasoning text
// (one event may release the text of several tokens).
func TestResponsesReasoningTokens(t *testing.T) {
	reply := func(backends.Request) []backends.Event {
		return []backends.Event{{Token: 1}, {Token: 2}, {Token: 3, Reasoning: "let me think"}, {Token: 4, Text: "hi"},
			{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{CompletionTokens: 5, ReasoningTokens: 3}}}
	}
	s, _ := respServer(t, reply, responses.ResponseStoreConfig{})
	r := decodeObject(t, post(t, s, "/v1/responses", `{"model":"m","input":"hi"}`))
	if got := get(r, "usage", "output_tokens_details", "reasoning_tokens"); got != 3.0 {
		t.Fatalf("reasoning_tokens %v, want 3: %v", got, r["usage"])
	}
}
