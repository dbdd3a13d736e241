package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/cache"
)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	return New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Origins: []string{"https://app.example"}})
}

func do(t *testing.T, s *Server, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://localhost"+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body is not an OpenAI error: %v: %s", err, w.Body)
	}
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("incomplete error: %s", w.Body)
	}
	return e
}

func TestHealthAndSystem(t *testing.T) {
	s := newTestServer(t)
	s.AddSystemSection("loaded", func() any { return []string{"m1"} })
	if w := do(t, s, "GET", "/health", nil); w.Code != 200 || w.Body.String() != `{"status":"ok"}` {
		t.Fatalf("/health = %d %s", w.Code, w.Body)
	}
	w := do(t, s, "GET", "/v1/system", nil)
	var sys map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &sys); err != nil || w.Code != 200 {
		t.Fatalf("/v1/system = %d %s", w.Code, w.Body)
	}
	for _, k := range []string{"version", "probe", "libraries", "loaded"} {
		if _, ok := sys[k]; !ok {
			t.Errorf("/v1/system lacks %q", k)
		}
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	s := newTestServer(t)
	w := do(t, s, "GET", "/v1/nothing", nil)
	if w.Code != 404 || decodeError(t, w).Error.Code != "not_found" {
		t.Fatalf("404 = %d %s", w.Code, w.Body)
	}
	w = do(t, s, "DELETE", "/health", nil)
	if w.Code != 405 || decodeError(t, w).Error.Code != "method_not_allowed" {
		t.Fatalf("405 = %d %s", w.Code, w.Body)
	}
}

func TestCORS(t *testing.T) {
	s := newTestServer(t)
	for origin, allowed := range map[string]bool{
		"chrome-extension://abcdef":  true,
		"moz-extension://1234":       true,
		"http://localhost:3000":      true,
		"http://127.0.0.1":           true,
		"https://app.example":        true,
		"https://evil.example":       false,
		"http://localhost.evil.test": false,
	} {
		w := do(t, s, "OPTIONS", "/v1/system", map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
		got := w.Header().Get("Access-Control-Allow-Origin")
		if allowed && (w.Code != 204 || got != origin) {
			t.Errorf("%s: preflight = %d, allow-origin %q", origin, w.Code, got)
		}
		if !allowed && (w.Code != 403 || got != "") {
			t.Errorf("%s: preflight = %d, allow-origin %q; want 403 without CORS headers", origin, w.Code, got)
		}
	}
}

type busyErr struct{}

func (busyErr) Error() string                     { return "model m is busy" }
func (busyErr) RetryAfterDuration() time.Duration { return 1500 * time.Millisecond }

type notFound struct{}

func (notFound) Error() string   { return "model x not found" }
func (notFound) HTTPStatus() int { return 404 }

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		retryAfter string
	}{
		{fmt.Errorf("acquire: %w", busyErr{}), 503, "2"},
		{fmt.Errorf("lookup: %w", notFound{}), 404, ""},
		{core.BadRequest("messages", "messages must not be empty"), 400, ""},
		{errors.New("boom"), 500, ""},
	}
	for _, tc := range cases {
		s := newTestServer(t)
		s.Engine.GET("/x", func(c *gin.Context) { core.WriteError(c, tc.err) })
		w := do(t, s, "GET", "/x", nil)
		e := decodeError(t, w)
		if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: status %d retry-after %q, want %d %q", tc.err, w.Code, w.Header().Get("Retry-After"), tc.status, tc.retryAfter)
		}
		if e.Error.Message != tc.err.Error() {
			t.Errorf("message = %q, want %q", e.Error.Message, tc.err.Error())
		}
	}
}

func TestPanicBecomes500(t *testing.T) {
	s := newTestServer(t)
	s.Engine.GET("/panic", func(c *gin.Context) { panic("bad") })
	w := do(t, s, "GET", "/panic", nil)
	if w.Code != http.StatusInternalServerError || decodeError(t, w).Error.Type != "server_error" {
		t.Fatalf("panic = %d %s", w.Code, w.Body)
	}
}

func TestMetricsAndUnload(t *testing.T) {
	m := &fakeChat{template: true, finish: "stop"}
	s := chatServer(t, map[string]cache.Instance{"m": m})
	if w := post(t, s, "/v1/unload", `{"model":"m"}`); w.Code != 404 || decodeError(t, w).Error.Code != "model_not_loaded" {
		t.Fatalf("unload of an unloaded model = %d %s", w.Code, w.Body)
	}
	if w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`); w.Code != 200 {
		t.Fatalf("chat = %d %s", w.Code, w.Body)
	}
	w := do(t, s, "GET", "/metrics", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `modeld_model_requests_total{model="m"} 1`) {
		t.Fatalf("metrics = %d\n%s", w.Code, w.Body)
	}
	w = do(t, s, "GET", "/v1/system", nil)
	if !strings.Contains(w.Body.String(), `"loaded":{"models":[{"id":"m"`) {
		t.Fatalf("/v1/system lacks the loaded model: %s", w.Body)
	}
	if w := post(t, s, "/v1/unload", `{"model":"m","wait":false}`); w.Code != 200 {
		t.Fatalf("unload = %d %s", w.Code, w.Body)
	}
}
