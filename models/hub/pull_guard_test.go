package hub

import (
	"github.com/modeld/modeld/models"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingServer is a local service an attacker would like the daemon to
// reach: it counts every request and every connection.
type countingServer struct {
	*httptest.Server
	reqs  atomic.Int64
	conns atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.reqs.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			cs.conns.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) port() string {
	_, p, _ := net.SplitHostPort(cs.Listener.Addr().String())
	return p
}

// newGuardedPuller is a Puller with the production address rule (no
// AllowPrivate); edit may change the config.
func newGuardedPuller(t *testing.T, s *models.Store, edit func(*PullConfig)) (*Puller, *sleepRec) {
	t.Helper()
	sleeps := &sleepRec{}
	cfg := PullConfig{Endpoint: "https://hub.invalid", Sleep: sleeps.sleep, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewPuller(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, sleeps
}

func TestPullRefusesPrivateTargets(t *testing.T) {
	local := newCountingServer(t, nil)
	local6, err := net.Listen("tcp", "[::1]:0")
	var port6 string
	if err == nil {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			local.reqs.Add(1)
		}), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(local6) }()
		t.Cleanup(func() { _ = srv.Close() })
		_, port6, _ = net.SplitHostPort(local6.Addr().String())
	} else {
		port6 = "9" // no IPv6 loopback here: the check refuses before dialling anyway
	}
	p := local.port()
	refs := []string{
		"http://127.0.0.1:" + p + "/x.gguf",
		"http://127.0.0.1:" + p + "/v1/models/x.gguf?secret=1",
		"http://[::1]:" + port6 + "/x.gguf",
		"http://localhost:" + p + "/x.gguf",
		"http://LOCALHOST.:" + p + "/x.gguf",
		"http://app.localhost:" + p + "/x.gguf",
		"http://169.254.169.254/latest/meta-data/iam.gguf",
		"http://[fe80::1]/x.gguf",
		"http://10.0.0.1/x.gguf",
		"http://172.16.5.4/x.gguf",
		"http://192.168.1.1/x.gguf",
		"http://100.64.0.1/x.gguf",
		"http://[fd00::1]/x.gguf",
		"http://0.0.0.0:" + p + "/x.gguf",
		"http://[::]:" + p + "/x.gguf",
		"http://[::ffff:127.0.0.1]:" + p + "/x.gguf",
		"http://224.0.0.1/x.gguf",
		"https://user:pw@127.0.0.1:" + p + "/x.gguf",
	}
	s := newTestStore(t)
	pl, sleeps := newGuardedPuller(t, s, nil)
	for _, ref := range refs {
		t.Run(ref, func(t *testing.T) {
			if err := pl.Check(ref, PullOptions{}); !errors.Is(err, models.ErrPrivateTarget) {
				t.Errorf("Check: %v, want ErrPrivateTarget", err)
			}
			_, err := pl.Pull(context.Background(), ref, PullOptions{}, nil)
			if !errors.Is(err, models.ErrPrivateTarget) {
				t.Fatalf("Pull: %v, want ErrPrivateTarget", err)
			}
			if strings.Contains(err.Error(), "secret=") || strings.Contains(err.Error(), "pw@") {
				t.Errorf("error shows the query or credentials: %v", err)
			}
			if st := models.ErrPrivateTarget.HTTPStatus(); st != http.StatusForbidden {
				t.Errorf("status %d", st)
			}
		})
	}
	if n, c := local.reqs.Load(), local.conns.Load(); n != 0 || c != 0 {
		t.Errorf("the local service saw %d requests on %d connections", n, c)
	}
	if len(sleeps.got()) != 0 {
		t.Errorf("refused pulls were retried: %v", sleeps.got())
	}
	if files := contentFiles(t, s.Root()); len(files) != 0 {
		t.Errorf("refused pulls left %v", files)
	}
}

// The address is checked when it is dialled, after name resolution: a name
// that resolves to loopback is refused though no rule names it.
func TestDialGuardChecksResolvedAddress(t *testing.T) {
	local := newCountingServer(t, nil)
	cfg := PullConfig{Endpoint: "https://hub.invalid"}.withDefaults()
	for _, addr := range []string{"localhost:" + local.port(), "127.0.0.1:" + local.port()} {
		conn, err := cfg.guard.dialContext(context.Background(), "tcp", addr)
		if err == nil {
			_ = conn.Close()
			t.Fatalf("dial %s: connected", addr)
		}
		if !errors.Is(err, models.ErrPrivateTarget) {
			t.Errorf("dial %s: %v, want ErrPrivateTarget", addr, err)
		}
	}
	if c := local.conns.Load(); c != 0 {
		t.Errorf("%d connections reached the local service", c)
	}
	// The configured hub endpoint is trusted as configured.
	cfg = PullConfig{Endpoint: local.URL}.withDefaults()
	conn, err := cfg.guard.dialContext(context.Background(), "tcp", local.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial the configured endpoint: %v", err)
	}
	_ = conn.Close()
}

// A server the test treats as public redirects to a local one: the redirect
// is refused, by the GET's and by the HEAD's redirect walk.
func TestPullRedirectToPrivateRefused(t *testing.T) {
	secret := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("internal")) })
	for _, tc := range []struct {
		name   string
		head   bool // the redirect comes in answer to HEAD (else HEAD is refused and GET redirects)
		target string
	}{
		{"get-literal", false, secret.URL + "/admin.gguf"},
		{"get-localhost", false, "http://localhost:" + secret.port() + "/admin.gguf"},
		{"head-literal", true, secret.URL + "/admin.gguf"},
		{"get-metadata", false, "http://169.254.169.254/latest/meta-data/x.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			public := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead && !tc.head {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				http.Redirect(w, r, tc.target, http.StatusFound)
			})
			pport, _ := strconv.Atoi(public.port())
			s := newTestStore(t)
			pl, _ := newGuardedPuller(t, s, func(c *PullConfig) {
				c.checkAddr = func(ap netip.AddrPort) error {
					if ap.Addr().IsLoopback() && int(ap.Port()) == pport {
						return nil // "public" for this test
					}
					return checkAddrPort(ap)
				}
			})
			_, err := pl.Pull(context.Background(), public.URL+"/model.gguf", PullOptions{}, nil)
			if !errors.Is(err, models.ErrPrivateTarget) {
				t.Fatalf("Pull: %v, want ErrPrivateTarget", err)
			}
			if public.reqs.Load() == 0 {
				t.Error("the public server was never asked")
			}
		})
	}
	if n := secret.reqs.Load(); n != 0 {
		t.Errorf("the private server answered %d requests", n)
	}
}

func TestCheckRedirect(t *testing.T) {
	g := newNetGuard(&PullConfig{Endpoint: "https://hub.example"})
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"https://a.example/x", "https://b.example/y", true},
		{"http://a.example/x", "https://b.example/y", true},
		{"http://a.example/x", "http://b.example/y", true},
		{"https://a.example/x", "http://b.example/y", false}, // no downgrade
		{"https://a.example/x", "ftp://b.example/y", false},
		{"https://a.example/x", "file:///etc/passwd", false},
		{"https://a.example/x", "https://127.0.0.1/y", false},
		{"https://a.example/x", "https://[::1]/y", false},
	} {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		err := checkRedirect(from, to, g)
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s: %v", tc.from, tc.to, err)
		}
		if err != nil && retryable(err) {
			t.Errorf("%s -> %s: a refused redirect is retryable", tc.from, tc.to)
		}
	}
}

func TestPrivateReason(t *testing.T) {
	for addr, private := range map[string]bool{
		"127.0.0.1": true, "127.255.0.9": true, "::1": true, "0.0.0.0": true, "::": true, "0.1.2.3": true,
		"10.1.2.3": true, "172.16.0.1": true, "172.31.255.255": true, "192.168.0.1": true,
		"169.254.169.254": true, "fe80::1": true, "fc00::1": true, "fd12:3456::1": true,
		"100.64.0.1": true, "100.127.255.255": true, "224.0.0.251": true, "ff02::1": true, "239.1.1.1": true,
		"255.255.255.255": true, "::ffff:10.0.0.1": true, "::ffff:127.0.0.1": true,
		"64:ff9b::7f00:1": true, "2002:7f00:1::1": true, "2002:c0a8:101::1": true, "fec0::1": true,
		"8.8.8.8": false, "1.1.1.1": false, "172.15.255.255": false, "172.32.0.1": false,
		"100.63.255.255": false, "100.128.0.1": false, "2606:4700::1111": false, "64:ff9b::808:808": false,
		"2002:808:808::1": false, "::ffff:8.8.8.8": false,
	} {
		a := netip.MustParseAddr(addr)
		if got := privateReason(a) != ""; got != private {
			t.Errorf("%s: private %v, want %v (%q)", addr, got, private, privateReason(a))
		}
	}
}

// plainServer serves body at any path ending in .gguf, with Range support,
// and counts GETs.
func plainServer(t *testing.T, body []byte) (*countingServer, *atomic.Int64) {
	t.Helper()
	var gets atomic.Int64
	cs := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		http.ServeContent(w, r, "x.gguf", time.Time{}, bytes.NewReader(body))
	})
	return cs, &gets
}

// partialFiles lists the .partial files of s.
func partialFiles(t *testing.T, s *models.Store) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for p, n := range walkFiles(t, filepath.Join(s.Root(), "partials")) {
		if strings.HasSuffix(p, ".partial") {
			out[p] = n
		}
	}
	return out
}

func TestPullEndlessBodyStopsAtTheBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*PullConfig)
	}{
		{"max-download", func(c *PullConfig) { c.MaxDownload = 1 << 20 }},
		{"free-disk", func(c *PullConfig) {
			c.DiskMargin = 1 << 20
			c.freeSpace = func(string) (int64, error) { return 3 << 20, nil }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			endless := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				chunk := bytes.Repeat([]byte("A"), 32<<10)
				for { // chunked, no Content-Length, never ends
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
			s := newTestStore(t)
			pl, sleeps := newGuardedPuller(t, s, func(c *PullConfig) {
				c.AllowPrivate = true
				tc.edit(c)
			})
			_, err := pl.Pull(context.Background(), endless.URL+"/endless.gguf", PullOptions{}, nil)
			if !errors.Is(err, models.ErrTooLarge) {
				t.Fatalf("Pull: %v, want ErrTooLarge", err)
			}
			if left := partialFiles(t, s); len(left) != 0 {
				t.Errorf("the over-bound partial stays: %v", left)
			}
			if len(sleeps.got()) != 0 || endless.reqs.Load() != 2 { // HEAD + one GET
				t.Errorf("retried: sleeps %v, requests %d", sleeps.got(), endless.reqs.Load())
			}
		})
	}
}

func TestPullSizeOverBoundRefusedBeforeDownload(t *testing.T) {
	const huge = int64(10) << 30
	for _, tc := range []struct {
		name    string
		headLen bool // HEAD announces the size; else HEAD is refused and GET's Content-Length does
		edit    func(*PullConfig)
		want    error
	}{
		{"head-max-download", true, func(c *PullConfig) { c.MaxDownload = 1 << 20 }, models.ErrTooLarge},
		{"get-max-download", false, func(c *PullConfig) { c.MaxDownload = 1 << 20 }, models.ErrTooLarge},
		{"head-free-disk", true, func(c *PullConfig) { c.freeSpace = func(string) (int64, error) { return 1 << 30, nil } }, models.ErrNoSpace},
		{"get-free-disk", false, func(c *PullConfig) { c.freeSpace = func(string) (int64, error) { return 1 << 30, nil } }, models.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodyBytes atomic.Int64
			srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead && !tc.headLen {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				w.Header().Set("Content-Length", strconv.FormatInt(huge, 10))
				w.WriteHeader(http.StatusOK)
				if r.Method == http.MethodGet {
					n, _ := w.Write(make([]byte, 1<<20))
					bodyBytes.Add(int64(n))
				}
			})
			s := newTestStore(t)
			pl, sleeps := newGuardedPuller(t, s, func(c *PullConfig) {
				c.AllowPrivate = true
				tc.edit(c)
			})
			_, err := pl.Pull(context.Background(), srv.URL+"/big.gguf", PullOptions{}, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Pull: %v, want %v", err, tc.want)
			}
			if tc.headLen && srv.reqs.Load() != 1 {
				t.Errorf("%d requests after HEAD announced %d bytes", srv.reqs.Load(), huge)
			}
			for p, n := range partialFiles(t, s) {
				if n != 0 {
					t.Errorf("partial %s holds %d bytes", p, n)
				}
			}
			if len(sleeps.got()) != 0 {
				t.Errorf("retried: %v", sleeps.got())
			}
		})
	}
}

// The hub listing's size counts too: a file larger than the free space is
// refused before any byte of it is fetched.
func TestPullHubFileLargerThanFreeSpace(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.freeSpace = func(string) (int64, error) { return 300 << 20, nil } })
	big := bytes.Repeat([]byte{1}, 64<<10)
	e.h.addRepo("org/big", map[string][]byte{"big-Q4_K_M.gguf": big})
	e.cfg.DiskMargin = 300<<20 - 32<<10 // leaves room for 32 KiB only
	e.p = e.newPuller(t)
	_, err := e.p.Pull(context.Background(), "hf:org/big", PullOptions{}, nil)
	if !errors.Is(err, models.ErrNoSpace) {
		t.Fatalf("Pull: %v, want ErrNoSpace", err)
	}
	if gets, n, _ := e.h.counts(); gets != 0 || n != 0 {
		t.Errorf("%d CDN GETs, %d bytes", gets, n)
	}
}

// failAfter is a partial file whose writes fail with ENOSPC after n bytes.
type failAfter struct {
	w io.Writer
	n int64
}

func (f *failAfter) Write(p []byte) (int, error) {
	if int64(len(p)) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, &fs.PathError{Op: "write", Path: "partial", Err: syscall.ENOSPC}
	}
	f.n -= int64(len(p))
	return f.w.Write(p)
}

func TestPullENOSPCIsNotRetriedAndResumes(t *testing.T) {
	body := tinyGGUF(t)
	srv, gets := plainServer(t, body)
	s := newTestStore(t)
	pl, sleeps := newGuardedPuller(t, s, func(c *PullConfig) { c.AllowPrivate = true })
	pl.partialWriter = func(w io.Writer) io.Writer { return &failAfter{w: w, n: 1000} }
	_, err := pl.Pull(context.Background(), srv.URL+"/tiny.gguf", PullOptions{}, nil)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, models.ErrNoSpace) {
		t.Fatalf("Pull: %v, want ENOSPC as ErrNoSpace", err)
	}
	if gets.Load() != 1 || len(sleeps.got()) != 0 {
		t.Errorf("ENOSPC retried: %d GETs, sleeps %v", gets.Load(), sleeps.got())
	}
	left := partialFiles(t, s)
	if len(left) != 1 {
		t.Fatalf("partials %v, want the one to resume", left)
	}
	for _, n := range left {
		if n != 1000 {
			t.Errorf("partial holds %d bytes, want 1000", n)
		}
	}
	pl.partialWriter = nil // space was freed
	m, err := pl.Pull(context.Background(), srv.URL+"/tiny.gguf", PullOptions{}, nil)
	if err != nil {
		t.Fatalf("second pull: %v", err)
	}
	if m.Files[0].Digest != "sha256:"+sha256Hex(body) {
		t.Errorf("digest %s", m.Files[0].Digest)
	}
}

func TestPullDoesNotEchoRemoteBodies(t *testing.T) {
	const secret = "SECRET-4d1f" // what the local service would leak
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":%q, "detail":"%s"}`, secret, secret)
	})
	hub := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"error":"%s"}`, secret)
	})
	var logs bytes.Buffer
	s, err := models.Open(t.TempDir(), models.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := newGuardedPuller(t, s, func(c *PullConfig) { c.AllowPrivate, c.Endpoint = true, hub.URL })
	_, err = pl.Pull(context.Background(), srv.URL+"/x.gguf?sig="+secret, PullOptions{}, nil)
	if !errors.Is(err, models.ErrRemoteNotFound) {
		t.Fatalf("Pull: %v, want ErrRemoteNotFound", err)
	}
	_, herr := pl.Pull(context.Background(), "hf:org/private", PullOptions{}, nil)
	if !errors.Is(herr, models.ErrUnauthorized) {
		t.Fatalf("hub pull: %v, want ErrUnauthorized", herr)
	}
	for _, text := range []string{err.Error(), herr.Error(), logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("remote body or query shown: %s", text)
		}
	}
	if !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(herr.Error(), "HTTP 403") {
		t.Errorf("errors lack the status: %v / %v", err, herr)
	}
}

func TestPullURLCredentialsNeverStoredOrShown(t *testing.T) {
	const pw = "pw-9c2e"
	body := tinyGGUF(t)
	var mu sync.Mutex
	var users []string
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		mu.Lock()
		users = append(users, u+":"+p)
		mu.Unlock()
		http.ServeContent(w, r, "x.gguf", time.Time{}, bytes.NewReader(body))
	})
	var logs bytes.Buffer
	s, err := models.Open(t.TempDir(), models.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := newGuardedPuller(t, s, func(c *PullConfig) { c.AllowPrivate = true })
	u, _ := url.Parse(srv.URL)
	ref := "http://mirror:" + pw + "@" + u.Host + "/models/tiny.gguf?token=" + pw
	var events []string
	m, err := pl.Pull(context.Background(), ref, PullOptions{}, func(p models.Progress) { events = append(events, p.Status) })
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(users) == 0 || users[0] != "mirror:"+pw {
		t.Errorf("the server got credentials %v", users)
	}
	mu.Unlock()
	got, err := s.Get(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source.URL != "http://"+u.Host+"/models/tiny.gguf?…" {
		t.Errorf("source URL %q", got.Source.URL)
	}
	var onDisk []string
	for p := range walkFiles(t, s.Root()) {
		if !strings.HasPrefix(p, "blobs/") {
			data, _ := os.ReadFile(filepath.Join(s.Root(), p))
			onDisk = append(onDisk, string(data))
		}
	}
	for _, text := range append(append(onDisk, logs.String(), fmt.Sprint(got.Source)), events...) {
		if strings.Contains(text, pw) || strings.Contains(text, "mirror:") {
			t.Errorf("credentials shown or stored: %s", text)
		}
	}
	// A failing pull's error shows neither.
	_, err = pl.Pull(context.Background(), "http://mirror:"+pw+"@"+u.Host+"/nothing/tiny.gguf", PullOptions{Name: "other"}, nil)
	if err == nil {
		srv.Close()
		_, err = pl.Pull(context.Background(), "http://mirror:"+pw+"@"+u.Host+"/gone.gguf", PullOptions{Name: "other2"}, nil)
	}
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("failed pull error: %v", err)
	}
	if _, err := pl.Pull(context.Background(), "ftp://mirror:"+pw+"@host/x.gguf", PullOptions{}, nil); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("invalid ref error: %v", err)
	}
}

// Through a proxy from the environment the proxy resolves the target, so the
// guard resolves and checks it before handing the request over; the proxy's
// own address may be dialled, but not asked for directly.
func TestNetGuardProxy(t *testing.T) {
	proxyURL, _ := url.Parse("http://127.0.0.1:3128")
	g := newNetGuard(&PullConfig{Endpoint: "https://hub.example"})
	g.proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "127.0.0.1" {
			return nil, nil // NO_PROXY for loopback, as net/http does
		}
		return proxyURL, nil
	}
	g.resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "public.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		case "rebind.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.5")}, nil
		}
		return nil, errors.New("no such host")
	}
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := g.proxyFor(req("https://rebind.example/x.gguf")); !errors.Is(err, models.ErrPrivateTarget) {
		t.Errorf("a name with a private address through the proxy: %v", err)
	}
	if _, err := g.proxyFor(req("http://10.1.2.3/x.gguf")); !errors.Is(err, models.ErrPrivateTarget) {
		t.Errorf("a private literal through the proxy: %v", err)
	}
	if pu, err := g.proxyFor(req("https://public.example/x.gguf")); err != nil || pu != proxyURL {
		t.Fatalf("public target: %v, %v", pu, err)
	}
	if !g.exempt("127.0.0.1:3128") {
		t.Error("the proxy in use is not exempt from the dial check")
	}
	if _, err := g.proxyFor(req("http://127.0.0.1:3128/x.gguf")); !errors.Is(err, models.ErrPrivateTarget) {
		t.Errorf("the proxy asked for directly: %v", err)
	}
	if g.exempt("127.0.0.1:3129") {
		t.Error("another loopback port is exempt")
	}
}
