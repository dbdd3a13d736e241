package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// spy records the work requests cause: models acquired or loaded, hub requests
// (a pull started), unloads before a delete, and what the store holds.
type spy struct {
	resolves atomic.Int32
	hubHits  atomic.Int32
	unloader *fakeUnloader
	store    *models.Store
	cache    *cache.Cache
	base     int32 // resolves after the setup
}

// guardedServer is a server with every route group registered over a real
// store (org/chat, org/embed), a puller whose hub counts requests, and a cache
// in which chat model "m" is loaded; any other model id is acquired (and
// counted) but not found.
func guardedServer(t *testing.T, opt Options) (*Server, *spy) {
	t.Helper()
	sp := &spy{unloader: &fakeUnloader{}, store: storeWithModels(t)}
	fakeHub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sp.hubHits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(fakeHub.Close)
	pl, err := hub.NewPuller(sp.store, hub.PullConfig{Endpoint: fakeHub.URL, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	chat := &fakeChat{pieces: []string{"ok"}, finish: backends.FinishStop, template: true}
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		sp.resolves.Add(1)
		if id != "m" {
			return cache.Spec{}, fmt.Errorf("model %s: %w", id, errNotFound)
		}
		return cache.Spec{ID: id, Task: "chat"}, nil
	}
	load := func(context.Context, cache.Spec) (cache.Instance, error) { return chat, nil }
	sp.cache, err = cache.New(cache.DefaultConfig(), resolve, load, cache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.cache.Close(context.Background()) })
	opt.Version, opt.Libs, opt.Cache, opt.Constraints = "test", backendsLibs(t), sp.cache, testConstraints
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	s := New(opt)
	s.RegisterModels(core.ModelsOptions{Store: sp.store, Puller: pl, Unloader: sp.unloader})
	s.RegisterOllama(core.ModelsOptions{Store: sp.store, Puller: pl, Unloader: sp.unloader})

	req := routeReq{"POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`}.build("localhost", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + opt.APIKey})
	if w := serve(s, req); w.Code != 200 {
		t.Fatalf("setup chat = %d %s", w.Code, w.Body)
	}
	sp.base = sp.resolves.Load()
	return s, sp
}

// assertNoWork fails when any request since the setup did work.
func (sp *spy) assertNoWork(t *testing.T) {
	t.Helper()
	if n := sp.resolves.Load() - sp.base; n != 0 {
		t.Errorf("%d models were acquired", n)
	}
	if n := sp.hubHits.Load(); n != 0 {
		t.Errorf("the hub got %d requests: a pull ran", n)
	}
	if len(sp.unloader.calls) != 0 {
		t.Errorf("unloads before a delete: %v", sp.unloader.calls)
	}
	for _, id := range []string{"org/chat", "org/embed"} {
		if _, err := sp.store.Get(id); err != nil {
			t.Errorf("%s is gone from the store: %v", id, err)
		}
	}
	if ms, _ := sp.store.List(); len(ms) != 2 {
		t.Errorf("the store holds %d models, want 2", len(ms))
	}
	if snap := sp.cache.Snapshot(); len(snap.Models) != 1 || snap.Models[0].ID != "m" {
		t.Errorf("loaded models changed: %+v", snap.Models)
	}
}

// assertDetects shows that the spy sees work: the same kinds of requests from
// an allowed caller do it.
func (sp *spy) assertDetects(t *testing.T, s *Server, hdr map[string]string) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	for _, rr := range []routeReq{
		{"POST", "/v1/embeddings", `{"model":"x","input":"hi"}`},
		{"POST", "/v1/models/pull", `{"model":"hf:org/tiny"}`},
		{"DELETE", "/v1/models/org/embed", ""},
		{"POST", "/v1/unload", `{"model":"m"}`},
	} {
		serve(s, rr.build("localhost", h))
	}
	if sp.resolves.Load() == sp.base || sp.hubHits.Load() == 0 || len(sp.unloader.calls) == 0 || len(sp.cache.Snapshot().Models) != 0 {
		t.Fatalf("allowed requests did no work: resolves %d (base %d), hub %d, unloads %v, loaded %+v",
			sp.resolves.Load(), sp.base, sp.hubHits.Load(), sp.unloader.calls, sp.cache.Snapshot().Models)
	}
	if _, err := sp.store.Get("org/embed"); err == nil {
		t.Fatal("an allowed delete did not delete")
	}
}

type routeReq struct{ method, path, body string }

func (rr routeReq) build(host string, hdr map[string]string) *http.Request {
	var body io.Reader
	if rr.body != "" {
		body = strings.NewReader(rr.body)
	}
	req := httptest.NewRequest(rr.method, "http://localhost"+rr.path, body)
	req.Host = host
	for k, v := range hdr {
		if v != "" && v != "Bearer " {
			req.Header.Set(k, v)
		}
	}
	return req
}

func serve(s *Server, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

// everyRoute is one request per registered route (parameters filled in, a
// body that would do work on POST routes) and one for an unknown path.
func everyRoute(t *testing.T, s *Server) []routeReq {
	t.Helper()
	var out []routeReq
	for _, r := range s.Engine.Routes() {
		segs := strings.Split(r.Path, "/")
		for i, seg := range segs {
			switch {
			case strings.HasPrefix(seg, ":"):
				segs[i] = "x"
			case strings.HasPrefix(seg, "*"):
				segs[i] = "org/chat"
			}
		}
		rr := routeReq{method: r.Method, path: strings.Join(segs, "/")}
		switch {
		case r.Path == "/v1/unload":
			rr.body = `{"model":"m"}`
		case r.Path == "/v1/models/pull", r.Path == "/api/pull":
			rr.body = `{"model":"hf:org/tiny"}`
		case r.Path == "/api/delete":
			rr.body = `{"model":"org/embed"}`
		case r.Path == "/api/copy":
			rr.body = `{"source":"org/chat","destination":"org/copy"}`
		case r.Method == http.MethodPost:
			rr.body = `{"model":"x","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"prompt":"hi","input":"hi","query":"q","documents":["a"]}`
		}
		out = append(out, rr)
	}
	if len(out) < 15 {
		t.Fatalf("only %d routes registered: %v", len(out), out)
	}
	// Each dialect's routes are there, so each error shape is checked.
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/api/chat", "/api/delete"} {
		if !slices.ContainsFunc(out, func(rr routeReq) bool { return rr.path == p }) {
			t.Fatalf("route %s is not registered", p)
		}
	}
	return append(out, routeReq{"GET", "/nope", ""}, routeReq{"POST", "/nope", `{"model":"x"}`},
		routeReq{"POST", "/api/nope", `{"model":"x"}`}, routeReq{"POST", "/v1/messages/nope", `{"model":"x"}`})
}

func postRoutes(t *testing.T, s *Server) []routeReq {
	var out []routeReq
	for _, rr := range everyRoute(t, s) {
		if rr.method == http.MethodPost {
			out = append(out, rr)
		}
	}
	return out
}

// refusalTexts are what each refusal's message says, in every dialect's
// shape (Ollama's carries only the message).
var refusalTexts = map[string]string{
	"host_not_allowed":       "is not allowed: modeld answers to loopback",
	"origin_not_allowed":     "is not allowed: modeld serves loopback pages",
	"missing_api_key":        "requires an API key",
	"invalid_api_key":        "is not this modeld's key",
	"unsupported_media_type": "must send its body as application/json",
	"request_too_large":      "larger than this route's limit",
	"request_timeout":        "stopped arriving",
}

// wantRefusal checks a refusal of a request for path: the status, and the
// error in the shape of the dialect that owns path (Anthropic's on
// /v1/messages, Ollama's under /api/, OpenAI's elsewhere) with the code,
// type or message of the refusal.
func wantRefusal(t *testing.T, w *httptest.ResponseRecorder, path string, status int, code, what string) {
	t.Helper()
	if w.Code != status {
		t.Errorf("%s = %d %s, want %d", what, w.Code, w.Body, status)
		return
	}
	text, ok := refusalTexts[code]
	if !ok {
		t.Fatalf("no message known for code %s", code)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &top); err != nil {
		t.Errorf("%s: body %s is not a JSON object", what, w.Body)
		return
	}
	switch {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		want := map[int]string{401: "authentication_error", 403: "permission_error", 413: "request_too_large"}[status]
		if want == "" {
			want = "invalid_request_error"
		}
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || len(top) != 2 || e.Type != "error" || e.Error.Type != want || !strings.Contains(e.Error.Message, text) {
			t.Errorf("%s: body %s, want an Anthropic error of type %s saying %q", what, w.Body, want, text)
		}
	case strings.HasPrefix(path, "/api/"):
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || len(top) != 1 || !strings.Contains(e.Error, text) {
			t.Errorf("%s: body %s, want an Ollama error saying %q", what, w.Body, text)
		}
	default:
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != code || !strings.Contains(e.Error.Message, text) || e.Error.Type == "" {
			t.Errorf("%s: body %s, want an OpenAI error with code %s", what, w.Body, code)
		}
	}
}

func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	s, sp := guardedServer(t, Options{})
	hosts := []string{"evil.example", "evil.example:11435", "127.0.0.1.evil.example", "127.0.0.1.evil.example:11435",
		"localhost.evil.example", "evil.localhost", "", "[2001:db8::1]", "[2001:db8::1]:11435", "2001:db8::1", "::1",
		"0.0.0.0:11435", "10.0.0.5", "[::ffff:8.8.8.8]:80", "[::1%25lo]", "127.1", "localhost:x", "[::1]x", "localhost:123456"}
	for _, host := range hosts {
		for _, rr := range everyRoute(t, s) {
			w := serve(s, rr.build(host, map[string]string{"Content-Type": "application/json"}))
			wantRefusal(t, w, rr.path, http.StatusForbidden, "host_not_allowed", fmt.Sprintf("Host %q %s %s", host, rr.method, rr.path))
		}
	}
	sp.assertNoWork(t)
	sp.assertDetects(t, s, nil)
}

func TestAllowedHosts(t *testing.T) {
	s, _ := guardedServer(t, Options{AllowedHosts: []string{"modeld.lan", "10.1.2.3", "[fd00::7]:80"}})
	for _, host := range []string{"localhost", "localhost:11435", "LocalHost.", "127.0.0.1", "127.0.0.1:11435", "127.9.8.7:1",
		"[::1]", "[::1]:11435", "[::ffff:127.0.0.1]:80", "modeld.lan", "MODELD.lan:8080", "10.1.2.3:11435", "[fd00::7]"} {
		if w := serve(s, routeReq{"GET", "/health", ""}.build(host, nil)); w.Code != 200 {
			t.Errorf("Host %q = %d %s", host, w.Code, w.Body)
		}
	}
	for _, host := range []string{"lan", "modeld.lan.evil.example", "10.1.2.4"} {
		wantRefusal(t, serve(s, routeReq{"GET", "/health", ""}.build(host, nil)), "/health", 403, "host_not_allowed", "Host "+host)
	}
	// The address a connection arrived on names this machine: a daemon bound
	// beyond loopback answers to it, and to no other address.
	for _, tc := range []struct {
		local, host string
		ok          bool
	}{
		{"192.168.7.9:11435", "192.168.7.9:11435", true},
		{"[fd00::9]:11435", "[fd00::9]:11435", true},
		{"192.168.7.9:11435", "192.168.7.10:11435", false},
		{"192.168.7.9:11435", "evil.example", false},
	} {
		req := routeReq{"GET", "/health", ""}.build(tc.host, nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tc.local))))
		if w := serve(s, req); (w.Code == 200) != tc.ok {
			t.Errorf("Host %q on a connection to %s = %d, want allowed=%v", tc.host, tc.local, w.Code, tc.ok)
		}
	}
}

var foreignOrigins = []string{"https://evil.example", "null", "http://localhost.evil.test", "http://127.0.0.1.evil.example",
	"https://evil.example:443", "http://localhost:3000/path", "http://user@localhost", "http://localhost?x", "file://",
	"http://[2001:db8::1]", "http://10.0.0.5:8080", "http://0.0.0.0:3000", "chrome-extension://abc:80", "javascript:alert(1)", ""}

func TestForeignOriginRefusedOnEveryRoute(t *testing.T) {
	s, sp := guardedServer(t, Options{Origins: []string{"https://app.example"}})
	for _, origin := range foreignOrigins {
		for _, rr := range everyRoute(t, s) {
			r := rr.build("localhost", map[string]string{"Content-Type": "application/json"})
			r.Header["Origin"] = []string{origin} // "" too: present but empty
			w := serve(s, r)
			wantRefusal(t, w, rr.path, http.StatusForbidden, "origin_not_allowed", fmt.Sprintf("Origin %q %s %s", origin, rr.method, rr.path))
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("Origin %q got Access-Control-Allow-Origin %q", origin, got)
			}
		}
	}
	// Two Origin headers, one of them allowed.
	r := routeReq{"POST", "/v1/unload", `{"model":"m"}`}.build("localhost", map[string]string{"Content-Type": "application/json"})
	r.Header["Origin"] = []string{"http://localhost", "https://evil.example"}
	wantRefusal(t, serve(s, r), "/v1/unload", 403, "origin_not_allowed", "two Origin headers")
	sp.assertNoWork(t)
}

func TestAllowedOrigins(t *testing.T) {
	s, _ := guardedServer(t, Options{Origins: []string{"https://app.example/"}})
	for _, origin := range []string{"chrome-extension://abcdefghijklmnop", "moz-extension://1b2c3d4e-0000-4000-8000-000000000000",
		"safari-web-extension://ABCD-1234", "http://localhost", "http://localhost:3000", "https://localhost:8443", "http://127.0.0.1",
		"http://127.0.0.1:5173", "http://127.8.9.10:1", "http://[::1]:3000", "https://app.example", "HTTPS://APP.EXAMPLE"} {
		pre := routeReq{"OPTIONS", "/v1/chat/completions", ""}.build("localhost", map[string]string{"Origin": origin,
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,x-api-key,content-type",
			"Access-Control-Request-Private-Network": "true"})
		w := serve(s, pre)
		allow := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers"))
		if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != origin || !strings.Contains(allow, "authorization") ||
			!strings.Contains(allow, "x-api-key") || w.Header().Get("Access-Control-Allow-Private-Network") != "true" {
			t.Errorf("%s: preflight = %d %v", origin, w.Code, w.Header())
		}
		rr := routeReq{"POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`}
		w = serve(s, rr.build("localhost", map[string]string{"Origin": origin, "Content-Type": "application/json; charset=utf-8"}))
		if w.Code != 200 || w.Header().Get("Access-Control-Allow-Origin") != origin || !strings.Contains(w.Header().Get("Vary"), "Origin") {
			t.Errorf("%s: chat = %d %s %v", origin, w.Code, w.Body, w.Header())
		}
	}
	// A preflight for a refused origin is refused, without CORS headers.
	w := serve(s, routeReq{"OPTIONS", "/v1/chat/completions", ""}.build("localhost", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}))
	if w.Code != 403 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign preflight = %d %v", w.Code, w.Header())
	}
}

func TestExtensionIDRestriction(t *testing.T) {
	s, sp := guardedServer(t, Options{Extensions: []string{"abcdefghijklmnop", "moz-extension://1B2C3D4E-0000-4000-8000-000000000000"}})
	for origin, ok := range map[string]bool{
		"chrome-extension://abcdefghijklmnop":                     true,
		"chrome-extension://ABCDEFGHIJKLMNOP":                     true,
		"moz-extension://1b2c3d4e-0000-4000-8000-000000000000":    true,
		"chrome-extension://pponmlkjihgfedcba":                    false,
		"safari-web-extension://abcdefghijklmnop":                 true, // a listed id, any extension scheme
		"moz-extension://ffffffff-0000-4000-8000-000000000000":    false,
		"chrome-extension://1b2c3d4e-0000-4000-8000-000000000000": false,
		"http://localhost:3000":                                   true, // loopback pages are not extensions
	} {
		w := serve(s, routeReq{"POST", "/v1/unload", `{"model":"nothing"}`}.build("localhost", map[string]string{"Origin": origin, "Content-Type": "application/json"}))
		if ok && w.Code == 403 || !ok && w.Code != 403 {
			t.Errorf("%s = %d %s, want allowed=%v", origin, w.Code, w.Body, ok)
		}
	}
	sp.assertNoWork(t)
}

// The bodies a page can send without a preflight.
var simpleContentTypes = []string{"text/plain", "text/plain;charset=UTF-8", "TEXT/PLAIN", "application/x-www-form-urlencoded",
	"Application/X-WWW-Form-Urlencoded; charset=utf-8", "multipart/form-data; boundary=----x", "multipart/form-data",
	"", "text/plain; charset=utf-8; x=\"", "application/json, text/plain", "text/plain; a=application/json"}

func TestSimpleCrossSiteBodiesRefused(t *testing.T) {
	s, sp := guardedServer(t, Options{Origins: []string{"https://app.example"}})
	origins := map[string]int{
		"https://evil.example":                415 + 1000, // 403: refused as an origin first
		"null":                                1403,
		"http://localhost:3000":               415,
		"chrome-extension://abcdefghijklmnop": 415,
		"https://app.example":                 415,
	}
	for origin, want := range origins {
		status, code := want, "unsupported_media_type"
		if want > 1000 {
			status, code = 403, "origin_not_allowed"
		}
		for _, ct := range simpleContentTypes {
			for _, rr := range postRoutes(t, s) {
				r := rr.build("localhost", map[string]string{"Origin": origin})
				if ct != "" {
					r.Header.Set("Content-Type", ct)
				}
				wantRefusal(t, serve(s, r), rr.path, status, code, fmt.Sprintf("Origin %s, Content-Type %q, POST %s", origin, ct, rr.path))
			}
		}
		// A body on a method that has none is refused the same way.
		r := routeReq{"DELETE", "/v1/models/org/chat", `{"x":1}`}.build("localhost", map[string]string{"Origin": origin, "Content-Type": "text/plain"})
		wantRefusal(t, serve(s, r), "/v1/models/org/chat", status, code, "DELETE with a text/plain body from "+origin)
	}
	sp.assertNoWork(t)
}

// Without an Origin (curl -d, SDKs) the body is read as JSON whatever its type.
func TestNoOriginAnyContentType(t *testing.T) {
	s, _ := guardedServer(t, Options{})
	for _, ct := range simpleContentTypes {
		r := routeReq{"POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`}.build("localhost", nil)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if w := serve(s, r); w.Code != 200 {
			t.Errorf("Content-Type %q without Origin = %d %s", ct, w.Code, w.Body)
		}
	}
}
