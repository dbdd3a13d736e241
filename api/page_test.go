package api

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/modeld/modeld/ui"
)

// TestPageServedWithoutKeyAPINot: with an API key set, the Local Models
// page and its assets are served without it (they hold no data) under a
// strict Content-Security-Policy, while the API it calls still needs it; a
// path that only looks like an asset gets no such pass.
func TestPageServedWithoutKeyAPINot(t *testing.T) {
	const key = "mk-page-0123456789"
	s, _ := guardedServer(t, Options{APIKey: key})
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html"},
		{"HEAD", "/", 200, "text/html"},
		{"GET", "/ui/app.js", 200, "text/javascript"},
		{"GET", "/ui/style.css", 200, "text/css"},
		{"GET", "/ui/index.html", 404, ""},
		{"GET", "/ui/nope.js", 404, ""},
		{"GET", "/ui/../v1/models", 401, ""},
		{"GET", "/v1/models", 401, ""},
		{"POST", "/", 401, ""},
	} {
		w := serve(s, routeReq{tc.method, tc.path, ""}.build("localhost", nil))
		if w.Code != tc.status {
			t.Errorf("%s %s without the key = %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.status)
			continue
		}
		if tc.status == 200 {
			if got := w.Header().Get("Content-Security-Policy"); got != ui.ContentSecurityPolicy {
				t.Errorf("%s %s: Content-Security-Policy %q", tc.method, tc.path, got)
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, ct, tc.ctype)
			}
		}
	}
	if !strings.Contains(ui.ContentSecurityPolicy, "default-src 'none'") || strings.Contains(ui.ContentSecurityPolicy, "unsafe") {
		t.Errorf("the policy is not strict: %s", ui.ContentSecurityPolicy)
	}
	w := serve(s, routeReq{"GET", "/v1/models", ""}.build("localhost", map[string]string{"Authorization": "Bearer " + key}))
	if w.Code != 200 {
		t.Errorf("GET /v1/models with the key = %d %s", w.Code, w.Body)
	}
}

// TestSameOriginPageOnLANAddress: the page served from the address the
// daemon listens on (not loopback) may call the API with its own Origin;
// another port of that host, or another host, may not.
func TestSameOriginPageOnLANAddress(t *testing.T) {
	s, _ := guardedServer(t, Options{})
	local := net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.168.7.5:8080"))
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"http://192.168.7.5:8080", 200},
		{"http://192.168.7.5:9090", 403},
		{"https://other.example", 403},
	} {
		req := routeReq{"GET", "/v1/models", ""}.build("192.168.7.5:8080", map[string]string{"Origin": tc.origin})
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
		if w := serve(s, req); w.Code != tc.status {
			t.Errorf("Origin %s on Host 192.168.7.5:8080 = %d %s, want %d", tc.origin, w.Code, w.Body, tc.status)
		}
	}
}

// TestMetricsWithoutKey: with MetricsWithoutKey, a scraper without the key
// reads /metrics (and nothing else); without it, /metrics needs the key.
func TestMetricsWithoutKey(t *testing.T) {
	const key = "mk-metrics-0123456789"
	for _, open := range []bool{true, false} {
		s, _ := guardedServer(t, Options{APIKey: key, MetricsWithoutKey: open})
		want := map[bool]int{true: 200, false: 401}[open]
		if w := serve(s, routeReq{"GET", "/metrics", ""}.build("localhost", nil)); w.Code != want {
			t.Errorf("MetricsWithoutKey %v: GET /metrics without the key = %d, want %d", open, w.Code, want)
		}
		for _, rr := range []routeReq{{"GET", "/v1/system", ""}, {"POST", "/metrics", "{}"}, {"GET", "/metrics/x", ""}} {
			if w := serve(s, rr.build("localhost", map[string]string{"Content-Type": "application/json"})); w.Code != 401 {
				t.Errorf("MetricsWithoutKey %v: %s %s without the key = %d, want 401", open, rr.method, rr.path, w.Code)
			}
		}
	}
}
