package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServeRefusesNonLoopbackWithoutKey(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.168.1.5:0", "[2001:db8::1]:0"} {
		home := t.TempDir()
		out, err := runCLI(t, map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": listen}, "serve")
		if err == nil {
			t.Fatalf("serve on %s without a key started", listen)
		}
		for _, want := range []string{"refusing to listen on " + listen, "--api-key", "MODELD_API_KEY", "--api-key-file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("serve on %s: error %q lacks %q (output %s)", listen, err, want, out)
			}
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("serve on %s touched the home before refusing: %v", listen, entries)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		listen, key string
		ok          bool
	}{
		{"127.0.0.1:11435", "", true},
		{"localhost:11435", "", true},
		{"[::1]:11435", "", true},
		{"127.0.0.2:1", "", true},
		{"0.0.0.0:11435", "", false},
		{":11435", "", false},
		{"10.0.0.2:11435", "", false},
		{"0.0.0.0:11435", "k3y", true},
		{"[::]:11435", "k3y", true},
	} {
		if err := checkExposure(Config{Listen: tc.listen, APIKey: tc.key}); (err == nil) != tc.ok {
			t.Errorf("listen %s key %q: %v, want ok=%v", tc.listen, tc.key, err, tc.ok)
		}
	}
}

// fakeDaemon answers the CLI's calls, refusing any without the key, and
// records the Authorization and Host of each.
type fakeDaemon struct {
	home  string // the home its /v1/system reports
	mu    sync.Mutex
	auth  []string
	hosts []string
}

func (f *fakeDaemon) start(t *testing.T, key string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.hosts = append(f.hosts, r.Host)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"this modeld requires an API key: send Authorization: Bearer KEY or x-api-key: KEY","type":"invalid_request_error","param":null,"code":"missing_api_key"}}`)
			return
		}
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/system":
			fmt.Fprintf(w, `{"loaded":{"models":[],"loaded":0},"config":{"home":{"value":%q}}}`, f.home)
		case r.Method == "POST" && r.URL.Path == "/v1/unload":
			fmt.Fprint(w, `{"model":"m","unloaded":true}`)
		case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/models/"):
			fmt.Fprint(w, `{"id":"local/x","object":"model","deleted":true,"freed_bytes":2048}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestCLISendsAPIKey(t *testing.T) {
	const key = "mk-cli-5b7e"
	f := &fakeDaemon{}
	addr := f.start(t, key)
	_, port, _ := net.SplitHostPort(addr)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{{"ps"}, {"unload", "m"}, {"rm", "local/x"}}
	recorded := t.TempDir()
	f.home = recorded
	writeRecord(t, recorded, "http://"+addr)
	for _, env := range []map[string]string{
		{"MODELD_API_KEY": key},
		{"MODELD_API_KEY_FILE": keyFile},
		{"MODELD_API_KEY": key, "MODELD_HOST": addr},
		{"MODELD_API_KEY_FILE": keyFile, "MODELD_HOME": t.TempDir(), "MODELD_LISTEN": "0.0.0.0:" + port}, // reached on loopback
	} {
		if env["MODELD_HOME"] == "" {
			env["MODELD_HOME"] = recorded
		} else {
			f.home = env["MODELD_HOME"] // found at --listen, serving this home
		}
		for _, args := range commands {
			if out, err := runCLI(t, env, args...); err != nil {
				t.Errorf("%v with %v: %v\n%s", args, env, err, out)
			}
		}
	}
	// Each command asks the daemon its home (GET /v1/system), then acts.
	if len(f.auth) != 4*2*len(commands) {
		t.Fatalf("the daemon got %d calls, want %d", len(f.auth), 4*2*len(commands))
	}
	for i, a := range f.auth {
		if a != "Bearer "+key || !strings.HasPrefix(f.hosts[i], "127.0.0.1:") {
			t.Errorf("call %d: Authorization %q, Host %q", i, a, f.hosts[i])
		}
	}
	// Without the key, the daemon's 401 comes with how to give the CLI one.
	f.home = recorded
	for _, args := range commands {
		_, err := runCLI(t, map[string]string{"MODELD_HOME": recorded}, args...)
		if err == nil || !strings.Contains(err.Error(), "requires an API key") || !strings.Contains(err.Error(), "MODELD_API_KEY") {
			t.Errorf("%v without the key: %v", args, err)
		}
	}
}

// writeRecord writes home's daemon record as a daemon at url would, with
// this process's id (a live one).
func writeRecord(t *testing.T, home, url string) {
	t.Helper()
	if err := writeDaemonRecord(home, daemonRecord{PID: os.Getpid(), URL: url, Home: home}); err != nil {
		t.Fatal(err)
	}
}

// The key set on serve is required on every route the daemon answers, and
// the daemon's own CLI gets through with it.
func TestServeWithAPIKey(t *testing.T) {
	const key = "mk-serve-9d41c0"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	_, base, logs := startDaemon(t, home, "--api-key-file", keyFile)
	get := func(path string, hdr map[string]string, host string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for _, path := range []string{"/health", "/v1/system", "/metrics", "/v1/models"} {
		res, body := get(path, nil, "")
		if res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, "missing_api_key") {
			t.Errorf("%s without the key = %d %s", path, res.StatusCode, body)
		}
		if res, body := get(path, map[string]string{"Authorization": "Bearer " + key}, "evil.example:11435"); res.StatusCode != 403 {
			t.Errorf("%s with the key from a foreign Host = %d %s", path, res.StatusCode, body)
		}
		res, body = get(path, map[string]string{"X-Api-Key": key}, "")
		if res.StatusCode != 200 {
			t.Errorf("%s with x-api-key = %d %s", path, res.StatusCode, body)
		}
		if strings.Contains(body, key) {
			t.Errorf("%s shows the key: %s", path, body)
		}
	}
	_, body := get("/v1/system", map[string]string{"Authorization": "Bearer " + key}, "")
	var sys struct {
		Config struct {
			APIKey struct {
				Set bool `json:"set"`
			} `json:"api_key"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(body), &sys); err != nil || !sys.Config.APIKey.Set {
		t.Errorf("/v1/system config: %v %s", err, body)
	}
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home, "MODELD_API_KEY": key}, "ps"); err != nil {
		t.Errorf("ps with the key: %v\n%s", err, out)
	}
	if _, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "ps"); err == nil || !strings.Contains(err.Error(), "--api-key") {
		t.Errorf("ps without the key: %v", err)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the daemon logged its key:\n%s", logs)
	}
}

// The server's own timeouts cut a request whose headers stall and an idle
// connection, never a long answer.
func TestHTTPServerTimeouts(t *testing.T) {
	more := make(chan struct{})
	hs := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "one\n")
		w.(http.Flusher).Flush()
		<-more
		_, _ = io.WriteString(w, "two\n")
	}), serverTimeouts{ReadHeader: 100 * time.Millisecond, Idle: 100 * time.Millisecond})
	if hs.ReadTimeout != 0 || hs.WriteTimeout != 0 || hs.MaxHeaderBytes != maxHeaderBytes {
		t.Fatalf("server %+v", hs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	stream, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	fmt.Fprint(stream, "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
	sr := bufio.NewReader(stream)
	res, err := http.ReadResponse(sr, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := bufio.NewReader(res.Body)
	if line, err := body.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("first line %q %v", line, err)
	}

	// closed waits until the server closes conn; the deadline only keeps a
	// broken server from hanging the test.
	closed := func(what string, conn net.Conn) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Fatalf("%s: the server did not close the connection: %v", what, err)
		}
	}
	stall, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	fmt.Fprint(stall, "GET /x HTTP/1.1\r\nHost: local")
	closed("stalled headers", stall)

	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "GET /quick HTTP/1.1\r\nHost: localhost\r\n\r\n")
	ir := bufio.NewReader(idle)
	_ = idle.SetReadDeadline(time.Now().Add(30 * time.Second))
	// The quick request is answered "one" and then waits for more too; answer
	// both streams and see the idle one closed after its response.
	if r2, err := http.ReadResponse(ir, nil); err != nil || r2.StatusCode != 200 {
		t.Fatalf("second request: %v", err)
	}

	// The first stream has lived past both timeouts and still goes on.
	close(more)
	rest, err := io.ReadAll(body)
	if err != nil || string(rest) != "two\n" {
		t.Fatalf("rest of the stream %q %v", rest, err)
	}
	closed("idle keep-alive", idle)
}
