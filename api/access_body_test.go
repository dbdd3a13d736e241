package api

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/core"
)

func TestAPIKeyOnEveryRoute(t *testing.T) {
	const key = "mk-3f9a0c2e7b1d4a56"
	var logs bytes.Buffer
	s, sp := guardedServer(t, Options{APIKey: key, Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	refused := []struct {
		hdr  map[string]string
		code string
	}{
		{nil, "missing_api_key"},
		{map[string]string{"Authorization": "Bearer"}, "missing_api_key"},
		{map[string]string{"Authorization": "Basic " + key}, "missing_api_key"},
		{map[string]string{"Authorization": "Bearer wrong"}, "invalid_api_key"},
		{map[string]string{"Authorization": "Bearer " + key[:len(key)-1]}, "invalid_api_key"},
		{map[string]string{"Authorization": "Bearer " + key + "0"}, "invalid_api_key"},
		{map[string]string{"X-Api-Key": "wrong"}, "invalid_api_key"},
		{map[string]string{"X-Api-Key": strings.ToUpper(key)}, "invalid_api_key"},
	}
	for _, rr := range everyRoute(t, s) {
		if pageFile(rr.build("localhost", nil)) {
			continue // the page's static files need no key (page_test.go)
		}
		for _, tc := range refused {
			h := map[string]string{"Content-Type": "application/json"}
			for k, v := range tc.hdr {
				h[k] = v
			}
			w := serve(s, rr.build("localhost", h))
			wantRefusal(t, w, rr.path, http.StatusUnauthorized, tc.code, fmt.Sprintf("%v on %s %s", tc.hdr, rr.method, rr.path))
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate %q", rr.method, rr.path, w.Header().Get("WWW-Authenticate"))
			}
		}
		// The right key does not get past a foreign Host.
		w := serve(s, rr.build("evil.example", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + key}))
		wantRefusal(t, w, rr.path, 403, "host_not_allowed", "foreign Host with the key on "+rr.path)
	}
	sp.assertNoWork(t)

	// An allowed origin's preflight carries no credentials and is answered.
	pre := routeReq{"OPTIONS", "/v1/chat/completions", ""}.build("localhost", map[string]string{"Origin": "chrome-extension://abc", "Access-Control-Request-Method": "POST"})
	if w := serve(s, pre); w.Code != 204 {
		t.Errorf("preflight without the key = %d %s", w.Code, w.Body)
	}
	// The key is accepted in either header, on every route.
	for _, hdr := range []map[string]string{{"Authorization": "Bearer " + key}, {"Authorization": "bearer  " + key}, {"X-Api-Key": key},
		{"Authorization": "Bearer wrong", "X-Api-Key": key}} {
		for _, rr := range everyRoute(t, s) {
			h := map[string]string{"Content-Type": "application/json"}
			for k, v := range hdr {
				h[k] = v
			}
			if w := serve(s, rr.build("localhost", h)); w.Code == 401 || w.Code == 403 {
				t.Errorf("%v on %s %s = %d %s", hdr, rr.method, rr.path, w.Code, w.Body)
			}
		}
	}
	if w := serve(s, routeReq{"GET", "/health", ""}.build("localhost", map[string]string{"X-Api-Key": key})); w.Code != 200 {
		t.Errorf("/health with the key = %d", w.Code)
	}
	if !strings.Contains(logs.String(), "request refused") {
		t.Fatalf("refusals are not logged:\n%s", logs.String())
	}
	for _, secret := range []string{key, key[:len(key)-1], "wrong"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs contain a sent key %q", secret)
		}
	}
}

func TestBodyLimits(t *testing.T) {
	s, sp := guardedServer(t, Options{Limits: Limits{MaxBody: 1024, MaxControlBody: 64}})
	pad := func(n int) string { return strings.Repeat("a", n) }
	chat := func(n int) string { return `{"model":"x","messages":[{"role":"user","content":"` + pad(n) + `"}]}` }
	for _, tc := range []struct {
		rr      routeReq
		chunked bool
	}{
		{routeReq{"POST", "/v1/chat/completions", chat(2000)}, false},
		{routeReq{"POST", "/v1/chat/completions", chat(2000)}, true},
		{routeReq{"POST", "/v1/embeddings", `{"model":"x","input":"` + pad(2000) + `"}`}, true},
		{routeReq{"POST", "/v1/models/pull", `{"model":"hf:org/tiny","name":"` + pad(100) + `"}`}, false},
		{routeReq{"POST", "/v1/models/pull", `{"model":"hf:org/tiny","name":"` + pad(100) + `"}`}, true},
		{routeReq{"POST", "/v1/unload", `{"model":"m","x":"` + pad(100) + `"}`}, true},
		{routeReq{"DELETE", "/v1/models/org/chat", pad(100)}, false},
		{routeReq{"GET", "/health", pad(100)}, false},
		// The other dialects' routes, in their own error shapes.
		{routeReq{"POST", "/v1/messages", chat(2000)}, false},
		{routeReq{"POST", "/v1/messages", chat(2000)}, true},
		{routeReq{"POST", "/v1/messages/count_tokens", chat(2000)}, true},
		{routeReq{"POST", "/v1/responses", `{"model":"x","input":"` + pad(2000) + `"}`}, true},
		{routeReq{"POST", "/api/chat", chat(2000)}, false},
		{routeReq{"POST", "/api/chat", chat(2000)}, true},
		{routeReq{"POST", "/api/generate", `{"model":"x","prompt":"` + pad(2000) + `"}`}, true},
		{routeReq{"POST", "/api/embed", `{"model":"x","input":"` + pad(2000) + `"}`}, true},
		{routeReq{"POST", "/api/pull", `{"model":"hf:org/tiny","x":"` + pad(100) + `"}`}, false},
		{routeReq{"POST", "/api/pull", `{"model":"hf:org/tiny","x":"` + pad(100) + `"}`}, true},
		{routeReq{"POST", "/api/copy", `{"source":"org/chat","destination":"org/` + pad(100) + `"}`}, true},
		{routeReq{"DELETE", "/api/delete", `{"model":"org/embed","x":"` + pad(100) + `"}`}, true},
	} {
		r := tc.rr.build("localhost", map[string]string{"Content-Type": "application/json"})
		if tc.chunked {
			r.ContentLength = -1
			r.Body = io.NopCloser(strings.NewReader(tc.rr.body))
		}
		w := serve(s, r)
		what := fmt.Sprintf("%s %s (%d bytes, chunked %v)", tc.rr.method, tc.rr.path, len(tc.rr.body), tc.chunked)
		wantRefusal(t, w, tc.rr.path, http.StatusRequestEntityTooLarge, "request_too_large", what)
		if strings.Contains(w.Body.String(), pad(50)) {
			t.Errorf("%s: the error echoes the body: %s", what, w.Body)
		}
	}
	sp.assertNoWork(t)
	if w := serve(s, routeReq{"POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + pad(900) + `"}]}`}.build("localhost", nil)); w.Code == 413 {
		t.Errorf("a body under the limit = %d %s", w.Code, w.Body)
	}
	if d := (Limits{}).withDefaults(); d.MaxBody != 32<<20 || d.MaxControlBody != 1<<20 {
		t.Errorf("default limits %+v", d)
	}
}

// rawRequest sends a request head on a fresh connection to srv and returns the connection.
func rawRequest(t *testing.T, srv *httptest.Server, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readStatus reads the status line of the answer on conn; the deadline only
// keeps a broken server from hanging the test.
func readStatus(t *testing.T, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// A body that stops arriving is cut, while a stream that started before it
// and outlives the body timeout and the write stall keeps going.
func TestSlowBodyCutLongStreamNot(t *testing.T) {
	s, sp := guardedServer(t, Options{Limits: Limits{BodyTimeout: 200 * time.Millisecond, WriteStall: 200 * time.Millisecond}})
	more := make(chan struct{})
	type result struct{ ctxErr, writeErr error }
	res := make(chan result, 1)
	s.Engine.POST("/test/stream", func(c *gin.Context) {
		var v map[string]any
		if err := core.DecodeJSON(c, &v); err != nil {
			core.WriteError(c, err)
			return
		}
		c.Status(200)
		_, _ = c.Writer.WriteString("one\n")
		c.Writer.Flush()
		select {
		case <-more:
		case <-c.Request.Context().Done():
		}
		ctxErr := c.Request.Context().Err()
		_, err := c.Writer.WriteString("two\n")
		c.Writer.Flush()
		res <- result{ctxErr, err}
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close) // after the connections opened below are closed

	resp, err := http.Post(srv.URL+"/test/stream", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("first line %q %v", line, err)
	}

	conn := rawRequest(t, srv, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
	if st := readStatus(t, conn); !strings.HasPrefix(st, "HTTP/1.1 408") {
		t.Fatalf("stalled body answered %q, want 408", st)
	}
	sp.assertNoWork(t)

	// The stalled body was cut, so the stream has lived longer than the body
	// timeout and has been silent longer than the write stall.
	close(more)
	r := <-res
	if r.ctxErr != nil || r.writeErr != nil {
		t.Fatalf("the stream was cut: context %v, write %v", r.ctxErr, r.writeErr)
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "two\n" {
		t.Fatalf("rest of the stream %q %v", rest, err)
	}
}

// A body that stops arriving on another dialect's route is cut with a 408 in
// that dialect's shape, and nothing is loaded.
func TestSlowBodyCutInDialectShape(t *testing.T) {
	s, sp := guardedServer(t, Options{Limits: Limits{BodyTimeout: 200 * time.Millisecond}})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens", "/api/chat", "/api/generate", "/api/embed", "/v1/responses"} {
		conn := rawRequest(t, srv, "POST "+p+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // only keeps a broken server from hanging the test
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", p, err)
		}
		w := httptest.NewRecorder()
		w.Code = resp.StatusCode
		_, _ = io.Copy(w.Body, resp.Body)
		resp.Body.Close()
		wantRefusal(t, w, p, http.StatusRequestTimeout, "request_timeout", "stalled body on "+p)
	}
	sp.assertNoWork(t)
}

// A client that stops reading a stream makes its writes fail after the write
// stall, which cancels the request (and frees the model it held).
func TestStalledReaderCut(t *testing.T) {
	s, _ := guardedServer(t, Options{Limits: Limits{WriteStall: 200 * time.Millisecond}})
	type result struct {
		ctxErr, writeErr error
		wrote            int64
	}
	res := make(chan result, 1)
	s.Engine.POST("/test/flood", func(c *gin.Context) {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		var wrote int64
		var err error
		for wrote < 4<<30 && err == nil {
			var n int
			n, err = c.Writer.Write(chunk)
			wrote += int64(n)
			c.Writer.Flush()
		}
		<-c.Request.Context().Done()
		res <- result{c.Request.Context().Err(), err, wrote}
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close) // after the connections opened below are closed
	rawRequest(t, srv, "POST /test/flood HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	select {
	case r := <-res:
		var ne net.Error
		if r.writeErr == nil || !errors.As(r.writeErr, &ne) || !ne.Timeout() || r.ctxErr == nil {
			t.Fatalf("after %d bytes: write error %v, context %v", r.wrote, r.writeErr, r.ctxErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a write to a client that does not read never failed")
	}
}

// FuzzAccessHeaders sends arbitrary Host, Origin and Content-Type values: the
// guard never panics, and what it lets through is, by a separate reading of
// the same headers, loopback (or the configured host) and an allowed origin.
func FuzzAccessHeaders(f *testing.F) {
	for _, seed := range [][3]string{
		{"localhost", "", ""}, {"127.0.0.1:11435", "chrome-extension://abc", "application/json"}, {"[::1]:1", "http://localhost:3000", "text/plain"},
		{"evil.example", "null", ""}, {"127.0.0.1.evil.example", "http://127.0.0.1.evil.example", "multipart/form-data; boundary=x"},
		{"[::ffff:127.0.0.1]", "http://[::1]", "application/json; charset=utf-8"}, {"modeld.lan:80", "https://app.example", "application/vnd.x+json"},
		{"localhost:", "http://localhost:", "application/json;"}, {"[::1", "http://[::1", "text/plain;"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s := New(Options{Constraints: testConstraints, Version: "test", Log: slog.New(slog.DiscardHandler), AllowedHosts: []string{"modeld.lan"}, Origins: []string{"https://app.example"}})
	var mu sync.Mutex
	s.Engine.POST("/echo", func(c *gin.Context) { c.Status(200) })
	f.Fuzz(func(t *testing.T, host, origin, ctype string) {
		r := httptest.NewRequest("POST", "http://localhost/echo", strings.NewReader("{}"))
		r.Host = host
		if origin != "" {
			r.Header["Origin"] = []string{origin}
		}
		if ctype != "" {
			r.Header["Content-Type"] = []string{ctype}
		}
		mu.Lock()
		w := serve(s, r)
		mu.Unlock()
		if w.Code != 200 {
			return
		}
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		a, err := netip.ParseAddr(h)
		if h != "localhost" && h != "modeld.lan" && (err != nil || !a.Unmap().IsLoopback()) {
			t.Fatalf("Host %q let through", host)
		}
		if origin == "" {
			return
		}
		u, err := url.Parse(origin)
		if err != nil || u.Path != "" {
			t.Fatalf("Origin %q let through", origin)
		}
		oh := strings.ToLower(u.Hostname())
		oa, aerr := netip.ParseAddr(oh)
		ok := extensionSchemes[u.Scheme] || strings.EqualFold(origin, "https://app.example") ||
			(u.Scheme == "http" || u.Scheme == "https") && (oh == "localhost" || aerr == nil && oa.Unmap().IsLoopback())
		if !ok {
			t.Fatalf("Origin %q let through", origin)
		}
		if !jsonContent([]string{ctype}) || !strings.Contains(strings.ToLower(ctype), "json") {
			t.Fatalf("Origin %q with Content-Type %q let through", origin, ctype)
		}
	})
}

// An unknown route or a wrong method under a dialect's paths is answered in
// that dialect's error shape, as the refusals are (ErrorShape).
func TestUnknownRouteInDialectShape(t *testing.T) {
	s, _ := guardedServer(t, Options{})
	for _, tc := range []struct {
		rr   routeReq
		want string
	}{
		{routeReq{"POST", "/api/nope", `{}`}, `{"error":"no route for POST /api/nope"}`},
		{routeReq{"GET", "/api/chat", ""}, `{"error":"GET is not allowed on /api/chat"}`},
		{routeReq{"POST", "/v1/messages/nope", `{}`}, `{"error":{"message":"no route for POST /v1/messages/nope","type":"not_found_error"},"type":"error"}`},
		{routeReq{"GET", "/v1/nope", ""}, `{"error":{"message":"no route for GET /v1/nope","type":"invalid_request_error","param":null,"code":"not_found"}}`},
	} {
		w := serve(s, tc.rr.build("localhost", map[string]string{"Content-Type": "application/json"}))
		if got := strings.TrimSpace(w.Body.String()); got != tc.want || w.Code != 404 && w.Code != 405 {
			t.Errorf("%s %s = %d %s, want %s", tc.rr.method, tc.rr.path, w.Code, got, tc.want)
		}
	}
}
