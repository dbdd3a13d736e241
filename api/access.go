package api

// Who may talk to the daemon. Every request passes through guard before the
// router does any work; the rules, in the order they are checked:
//
//  1. Host. The Host header must name loopback ("localhost", 127.0.0.0/8, ::1,
//     any port), the address the connection arrived on (so a daemon bound to a
//     LAN address answers to that address), or one of Options.AllowedHosts.
//     Anything else, an empty Host included, is 403: a page that rebinds its own
//     name to 127.0.0.1 still sends its own name. Names under .localhost are not
//     treated as loopback: not every resolver pins them there.
//  2. Origin. A request that carries Origin is served only when the origin is a
//     loopback page (http or https, any port), the daemon's own pages (the
//     origin's host and port are the request's Host, which rule 1 allowed:
//     the Local Models page served from a LAN address), a browser extension
//     (chrome-extension, moz-extension, safari-web-extension; only the ids in
//     Options.Extensions when that list is set) or one of Options.Origins;
//     otherwise 403, "Origin: null" included. Allowed origins get CORS headers
//     and their preflights are answered here.
//  3. API key. When Options.APIKey is set, every request but an allowed
//     origin's preflight (browsers send those without credentials) must send it
//     as "Authorization: Bearer KEY" or "x-api-key: KEY"; otherwise 401 with
//     WWW-Authenticate. /health is no exception; only GET and HEAD of the Local
//     Models page's static files (package ui), which hold no data, are served
//     without it: the page asks for the key and sends it on its API calls; and
//     GET /metrics when Options.MetricsWithoutKey is set.
//  4. Bodies without a preflight. With an Origin, a request that has or may
//     have a body must send it as JSON (application/json or +json): text/plain,
//     form-urlencoded, multipart and a missing type are 415, so no page can
//     drive a POST with a simple request. Without an Origin (curl, SDKs) any
//     type is read as JSON, as before.
//  5. Size and time. Bodies are bounded (413 before any work when
//     Content-Length says so, and while reading otherwise); a body that stops
//     arriving is cut after Limits.BodyTimeout, and a response write that makes
//     no progress for Limits.WriteStall fails and cancels the request, while a
//     stream that keeps writing runs as long as it needs.

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/ui"
)

// Limits bound request bodies and slow peers. Zero fields take the defaults.
type Limits struct {
	// MaxBody bounds the body of inference routes (chat, completions,
	// embeddings, classify, rerank, summarize: every POST not listed as control).
	MaxBody int64
	// MaxControlBody bounds the body of control routes (pull, unload, and
	// Ollama's pull, copy and show) and of every GET, HEAD, DELETE and
	// OPTIONS request.
	MaxControlBody int64
	// BodyTimeout is how long a request body may take to arrive once the
	// headers are read.
	BodyTimeout time.Duration
	// WriteStall is how long one response write may block on a peer that does
	// not read; a stream that keeps writing is never cut.
	WriteStall time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxBody        = 32 << 20
	DefaultMaxControlBody = 1 << 20
	DefaultBodyTimeout    = 60 * time.Second
	DefaultWriteStall     = 2 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxBody <= 0 {
		l.MaxBody = DefaultMaxBody
	}
	if l.MaxControlBody <= 0 {
		l.MaxControlBody = DefaultMaxControlBody
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.WriteStall <= 0 {
		l.WriteStall = DefaultWriteStall
	}
	return l
}

// controlRoutes are the POST routes whose bodies are small commands.
var controlRoutes = map[string]bool{"/v1/models/pull": true, "/v1/unload": true, "/api/pull": true, "/api/copy": true, "/api/show": true}

var extensionSchemes = map[string]bool{"chrome-extension": true, "moz-extension": true, "safari-web-extension": true}

// access is the compiled form of the access settings.
type access struct {
	hosts      map[string]bool // normalized AllowedHosts
	origins    map[string]bool // normalized Origins
	anyOrigin  bool            // Origins holds "*"
	extensions map[string]bool // ids and full origins; empty: every extension
	keyHash    *[32]byte       // nil: no key
	keyless    bool            // GET /metrics needs no key (Options.MetricsWithoutKey)
	limits     Limits
}

func newAccess(opt Options) *access {
	a := &access{hosts: map[string]bool{}, origins: map[string]bool{}, extensions: map[string]bool{}, limits: opt.Limits.withDefaults()}
	for _, h := range opt.AllowedHosts {
		if n, ok := hostOnly(strings.TrimSpace(h)); ok && n != "" {
			a.hosts[normalizeName(n)] = true
		}
	}
	for _, o := range opt.Origins {
		o = strings.TrimSpace(o)
		if o == "*" {
			a.anyOrigin = true
		} else if o != "" {
			a.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
		}
	}
	for _, e := range opt.Extensions {
		if e = strings.ToLower(strings.TrimRight(strings.TrimSpace(e), "/")); e != "" {
			a.extensions[e] = true
		}
	}
	a.keyless = opt.MetricsWithoutKey
	if opt.APIKey != "" {
		h := sha256.Sum256([]byte(opt.APIKey))
		a.keyHash = &h
	}
	return a
}

// guard applies the access rules, then the body limits and deadlines, and
// hands the request to next.
func (s *Server) guard(next http.Handler) http.Handler {
	a := s.access
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r) {
			s.refuse(w, r, &core.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "host_not_allowed",
				Message: fmt.Sprintf("host %q is not allowed: modeld answers to loopback names and addresses and to the hosts set with --allowed-hosts", core.Clip(r.Host))})
			return
		}
		w.Header().Add("Vary", "Origin") // answers differ by origin: no cache may share them
		origins, hasOrigin := r.Header["Origin"]
		if hasOrigin {
			if len(origins) != 1 || !(a.originAllowed(origins[0]) || sameOrigin(origins[0], r.Host)) {
				s.refuse(w, r, &core.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "origin_not_allowed",
					Message: fmt.Sprintf("origin %q is not allowed: modeld serves loopback pages, browser extensions and the origins set with --origins", core.Clip(strings.Join(origins, ", ")))})
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origins[0])
			h.Set("Access-Control-Expose-Headers", "X-Modeld-Device, X-Modeld-Truncated, Retry-After")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, X-Api-Key, Content-Type, OpenAI-Organization, OpenAI-Project, X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, Anthropic-Version, Anthropic-Beta, Anthropic-Dangerous-Direct-Browser-Access")
				h.Set("Access-Control-Max-Age", "600")
				if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
					h.Set("Access-Control-Allow-Private-Network", "true")
				}
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if e := a.checkKey(r); e != nil && !pageFile(r) && !(a.keyless && metricsScrape(r)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="modeld"`)
			s.refuse(w, r, e)
			return
		}
		if hasOrigin && mayHaveBody(r) && !jsonContent(r.Header.Values("Content-Type")) {
			s.refuse(w, r, &core.Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: "a request with an Origin header must send its body as application/json"})
			return
		}
		limit := a.bodyLimit(r)
		if r.ContentLength > limit {
			s.refuse(w, r, core.TooLarge(limit))
			return
		}
		rc := http.NewResponseController(w)
		if r.ContentLength != 0 {
			// net/http lifts it when the body has been read to its end, before
			// it reads the connection for the next request (so a long answer
			// is not cut by it).
			_ = rc.SetReadDeadline(time.Now().Add(a.limits.BodyTimeout))
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if rc.SetWriteDeadline(time.Time{}) == nil { // also clears a deadline left by the previous request on this connection
			sw := &stallWriter{ResponseWriter: w, rc: rc, stall: a.limits.WriteStall}
			defer sw.finish()
			w = sw
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request that the access rules turned away, before any
// work, in the error shape of the dialect whose route it asked for.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *core.Error) {
	s.Log.Info("request refused", "method", r.Method, "path", core.Clip(r.URL.Path), "status", e.Status, "code", e.Code,
		"remote", r.RemoteAddr, "host", core.Clip(r.Host), "origin", core.Clip(r.Header.Get("Origin")))
	core.WriteErrorTo(w, e, s.ErrorShape(r.URL.Path))
}

func (a *access) hostAllowed(r *http.Request) bool {
	host, ok := hostOnly(r.Host)
	if !ok || host == "" {
		return false
	}
	name := normalizeName(host)
	if name == "localhost" || a.hosts[name] {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" {
		return false
	}
	addr = addr.Unmap()
	if addr.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap() == addr && !addr.IsUnspecified() {
			return true
		}
	}
	return false
}

// hostOnly strips the port from a Host header value ("[::1]:80" -> "::1",
// "a:80" -> "a"); ok is false when the value is malformed.
func hostOnly(hostport string) (host string, ok bool) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 || !validPort(hostport[end+1:]) {
			return "", false
		}
		return hostport[1:end], true
	}
	switch strings.Count(hostport, ":") {
	case 0:
		return hostport, true
	case 1:
		i := strings.IndexByte(hostport, ':')
		return hostport[:i], validPort(hostport[i:])
	}
	return "", false // a bare IPv6 address is not a valid Host
}

// validPort accepts "" or ":" followed by up to 5 digits.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' || len(p) > 6 {
		return false
	}
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// normalizeName lower-cases a host name and drops one trailing dot.
func normalizeName(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func (a *access) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return false
	}
	host, ok := hostOnly(u.Host)
	if !ok || host == "" {
		return false
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(host)
	switch {
	case extensionSchemes[scheme]:
		return host == strings.ToLower(u.Host) && (len(a.extensions) == 0 || a.extensions[host] || a.extensions[scheme+"://"+host])
	case scheme == "http" || scheme == "https":
		if host == "localhost" {
			return true
		}
		if addr, err := netip.ParseAddr(host); err == nil && addr.Zone() == "" && addr.Unmap().IsLoopback() {
			return true
		}
	}
	return a.anyOrigin || a.origins[strings.ToLower(origin)]
}

// sameOrigin reports whether origin is an http(s) page of the host the
// request was sent to (host and port as in the Host header).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return u.Host != "" && strings.EqualFold(u.Host, host)
}

// metricsScrape reports whether r is a GET or HEAD of /metrics.
func metricsScrape(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/metrics"
}

// pageFile reports whether r asks for one of the Local Models page's static
// files, which are served without the API key.
func pageFile(r *http.Request) bool {
	p := r.URL.Path
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && path.Clean(p) == p && ui.IsAsset(p)
}

// checkKey returns nil when no key is set or the request carries it.
func (a *access) checkKey(r *http.Request) *core.Error {
	if a.keyHash == nil {
		return nil
	}
	var sent []string
	for _, v := range r.Header.Values("Authorization") {
		if scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "Bearer") {
			sent = append(sent, strings.TrimSpace(tok))
		}
	}
	for _, v := range r.Header.Values("X-Api-Key") {
		sent = append(sent, strings.TrimSpace(v))
	}
	match := 0
	for _, k := range sent {
		h := sha256.Sum256([]byte(k))
		match |= subtle.ConstantTimeCompare(h[:], a.keyHash[:])
	}
	switch {
	case match == 1:
		return nil
	case len(sent) == 0:
		return &core.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "missing_api_key",
			Message: "this modeld requires an API key: send Authorization: Bearer KEY or x-api-key: KEY"}
	}
	return &core.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "the API key sent is not this modeld's key"}
}

// mayHaveBody reports whether a request has, or by its method may carry, a body.
func mayHaveBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return r.ContentLength != 0
}

// jsonContent reports whether the Content-Type values name one JSON media type.
func jsonContent(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, _, err := mime.ParseMediaType(values[0])
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func (a *access) bodyLimit(r *http.Request) int64 {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		if !controlRoutes[r.URL.Path] {
			return a.limits.MaxBody
		}
	}
	return a.limits.MaxControlBody
}

// stallWriter moves the connection's write deadline ahead as the response is
// written, so that only a write blocked for about stall (between 3/4 and all
// of it) fails; net/http then cancels the request's context.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	next  time.Time // the deadline is moved again from then on
}

func (w *stallWriter) extend() {
	now := time.Now()
	if now.Before(w.next) {
		return
	}
	_ = w.rc.SetWriteDeadline(now.Add(w.stall))
	w.next = now.Add(w.stall / 4)
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

func (w *stallWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

// Hijack hands over the connection (no route does this today).
func (w *stallWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.rc.Hijack() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish gives the server's final flush, after the handler returns, a fresh deadline.
func (w *stallWriter) finish() {
	w.next = time.Time{}
	w.extend()
}
