package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultEndpoint is the hub used when PullConfig.Endpoint is empty.
const DefaultEndpoint = models.DefaultEndpoint

// PullConfig configures the network side of pulls. cmd/modeld fills it once
// from its configuration (MODELD_HF_ENDPOINT, HF_TOKEN, MODELD_OFFLINE); the
// store reads no environment variables. Zero fields take the documented
// defaults.
type PullConfig struct {
	Endpoint string // hub base URL; default DefaultEndpoint
	// Token is sent as "Authorization: Bearer <Token>" to the hub endpoint's
	// host only: never to a plain-URL pull and never across a redirect to
	// another host (the CDN URLs the hub redirects to are pre-signed). This is
	// what huggingface_hub does: it follows only relative redirects with the
	// token and drops the header for a redirect to another host.
	Token   string
	Offline bool // refuse every network access with ErrOffline

	// AllowPrivate lets pulls connect to loopback, link-local, private,
	// shared (CGNAT), multicast and unspecified addresses. Off, such
	// connections fail with ErrPrivateTarget (see netguard.go); the hub
	// endpoint's own host:port is always allowed.
	AllowPrivate bool
	// MaxDownload is the largest file a pull accepts, in bytes, checked
	// against the listing, the server's Content-Length and the bytes that
	// arrive; 0: no fixed bound. Free disk space (less DiskMargin) bounds
	// every download in any case.
	MaxDownload int64
	DiskMargin  int64 // free space a download must leave; default 256 MiB

	// Client: default no overall timeout, 60 s to response headers, and the
	// address check of every dial. A caller-supplied Client's transport is
	// used as is: only literal addresses and redirects are checked then.
	Client    *http.Client
	UserAgent string // default "modeld"

	Parallel          int   // ranges fetched at once for a large file; default 4
	ParallelThreshold int64 // files of at least this size are fetched in ranges; default 64 MiB
	MaxRetries        int   // retries of a request that fails without progress; default 5
	ChecksumRetries   int   // re-downloads after a sha256 mismatch; default 2

	BackoffBase time.Duration                                    // first retry wait, doubled each retry; default 1 s
	BackoffMax  time.Duration                                    // cap on one wait; default 30 s
	Sleep       func(ctx context.Context, d time.Duration) error // default: a timer, cut short by ctx

	ProgressStep int64 // bytes between two progress events of one file; default 1 MiB
	SidecarEvery int64 // a ranged download records its progress at least every this many bytes per range; default 8 MiB

	guard     *netGuard                       // set by withDefaults
	checkAddr func(netip.AddrPort) error      // tests: the address rule instead of checkAddrPort
	freeSpace func(dir string) (int64, error) // tests: free bytes instead of statfs
}

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg PullConfig) withDefaults() PullConfig {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	cfg.guard = newNetGuard(&cfg)
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 60 * time.Second
		t.DialContext = cfg.guard.dialContext
		t.Proxy = cfg.guard.proxyFor
		cfg.Client = &http.Client{Transport: t}
	}
	if cfg.DiskMargin <= 0 {
		cfg.DiskMargin = 256 << 20
	}
	if cfg.freeSpace == nil {
		cfg.freeSpace = freeSpace
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "modeld"
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	if cfg.ParallelThreshold <= 0 {
		cfg.ParallelThreshold = 64 << 20
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 5
	}
	if cfg.ChecksumRetries <= 0 {
		cfg.ChecksumRetries = 2
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.ProgressStep <= 0 {
		cfg.ProgressStep = 1 << 20
	}
	if cfg.SidecarEvery <= 0 {
		cfg.SidecarEvery = 8 << 20
	}
	return cfg
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statusError is an HTTP answer the pull did not expect. Its message holds
// the status and a fixed reason, never the remote body (a pull must not turn
// into a way of reading another service's answers) nor the URL's query.
type statusError struct {
	Code int
	URL  string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("GET %s: HTTP %d", models.RedactURL(e.URL), e.Code)
	switch {
	case e.Is(models.ErrUnauthorized):
		msg += " (" + models.ErrUnauthorized.Error() + ")"
	case e.Is(models.ErrRemoteNotFound):
		msg += " (" + models.ErrRemoteNotFound.Error() + ")"
	}
	return msg
}

// Is maps statuses to the package's errors.
func (e *statusError) Is(target error) bool {
	switch target {
	case models.ErrUnauthorized:
		return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
	case models.ErrRemoteNotFound:
		return e.Code == http.StatusNotFound || e.Code == http.StatusGone
	}
	return false
}

// HTTPStatus is the status the daemon answers for this remote failure.
func (e *statusError) HTTPStatus() int {
	if e.Is(models.ErrRemoteNotFound) {
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

func (e *statusError) retryable() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests || e.Code == http.StatusRequestTimeout
}

// newStatusError closes the body unread and records the status.
func newStatusError(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	return &statusError{Code: resp.StatusCode, URL: resp.Request.URL.String()}
}

// retryable reports whether err may go away on retry: network errors,
// truncated bodies, 5xx, 429, 408. Not retryable: cancellation, refused
// targets, size bounds, and local file errors (ENOSPC above all: a full disk
// is not fixed by downloading again).
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, models.ErrPrivateTarget) || errors.Is(err, models.ErrTooLarge) || errors.Is(err, models.ErrNoSpace) || errors.Is(err, errRedirectRefused) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false // the local file system, not the network
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.retryable()
	}
	// syscall.Errno satisfies net.Error too: only errors of the network
	// stack count as network errors.
	var oe *net.OpError
	var ue *url.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &oe) || errors.As(err, &ue) ||
		errors.Is(err, errShortBody) || strings.Contains(err.Error(), "connection reset")
}

// unreachable reports whether err says that the host cannot be resolved or
// reached at all: a name that does not resolve (no network, or no such
// host), a connection refused, a network or host unreachable. Such a first
// failure of a request is not retried; one that comes while a request is
// already being retried (a server restarting) is.
func unreachable(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

// errShortBody: a response ended before the bytes it announced.
var errShortBody = errors.New("response ended early")

// backoff counts retries of one request and waits between them: BackoffBase,
// doubled each retry, capped at BackoffMax. A retry after progress starts
// over from BackoffBase.
type backoff struct {
	cfg     *PullConfig
	retries int
}

// wait returns nil after sleeping when err is retryable and retries remain,
// else an error that wraps err.
func (b *backoff) wait(ctx context.Context, err error, progressed bool) error {
	if !retryable(err) {
		return err
	}
	if !progressed && b.retries == 0 && unreachable(err) {
		return err // offline, or nothing there: waiting seconds to ask again would not help
	}
	if progressed {
		b.retries = 0
	}
	if b.retries >= b.cfg.MaxRetries {
		return fmt.Errorf("giving up after %d retries: %w", b.retries, err)
	}
	d := b.cfg.BackoffBase << b.retries
	if d > b.cfg.BackoffMax || d <= 0 {
		d = b.cfg.BackoffMax
	}
	b.retries++
	if serr := b.cfg.Sleep(ctx, d); serr != nil {
		return fmt.Errorf("%w (while waiting to retry after: %w)", serr, err)
	}
	return nil
}

// hubClient speaks the parts of the Hugging Face hub protocol a pull needs.
type hubClient struct {
	cfg      *PullConfig
	endpoint *url.URL
}

func newHubClient(cfg *PullConfig) (*hubClient, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("hub endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	return &hubClient{cfg: cfg, endpoint: u}, nil
}

// newRequest builds a request with the user agent, and the token when u is
// on the hub's host.
func (h *hubClient) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	if h.cfg.Offline {
		return nil, fmt.Errorf("%w: not fetching %s (unset offline mode, or use modeld import)", models.ErrOffline, models.RedactURL(u))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", h.cfg.UserAgent)
	if h.cfg.Token != "" && sameHost(req.URL, h.endpoint) {
		req.Header.Set("Authorization", "Bearer "+h.cfg.Token)
	}
	return req, nil
}

// sameHost compares scheme and host:port.
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// do sends req on a client that checks every redirect (checkRedirect) and
// strips Authorization when a redirect leaves the request's original host.
// Errors show the URL without credentials or query.
func (h *hubClient) do(req *http.Request) (*http.Response, error) {
	if err := h.cfg.guard.checkURL(req.URL); err != nil {
		return nil, err
	}
	c := *h.cfg.Client
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("%w: stopped after 10 redirects", errRedirectRefused)
		}
		if err := checkRedirect(via[len(via)-1].URL, r.URL, h.cfg.guard); err != nil {
			return err
		}
		if !sameHost(r.URL, via[0].URL) {
			r.Header.Del("Authorization")
		}
		return nil
	}
	resp, err := c.Do(req)
	return resp, redactURLError(err)
}

// redactURLError rewrites the URL of a *url.Error (net/http puts the whole
// URL, query included, in its errors).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = models.RedactURL(ue.URL)
	}
	return err
}

// getJSON fetches u into v, retrying transient failures. It returns the
// response's Link "next" URL for paginated listings.
func (h *hubClient) getJSON(ctx context.Context, u string, v any) (string, error) {
	b := backoff{cfg: h.cfg}
	for {
		next, err := h.getJSONOnce(ctx, u, v)
		if err == nil {
			return next, nil
		}
		if werr := b.wait(ctx, err, false); werr != nil {
			return "", werr
		}
	}
}

func (h *hubClient) getJSONOnce(ctx context.Context, u string, v any) (string, error) {
	req, err := h.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.do(req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", newStatusError(resp)
	}
	defer resp.Body.Close() //nolint:errcheck // read fully below
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return "", fmt.Errorf("decode %s: %w", models.RedactURL(u), err)
	}
	return nextLink(resp.Header.Values("Link"), resp.Request.URL), nil
}

// nextLink returns the rel="next" target of Link headers, resolved against base.
func nextLink(links []string, base *url.URL) string {
	for _, header := range links {
		for _, l := range strings.Split(header, ",") {
			parts := strings.Split(l, ";")
			target := strings.Trim(strings.TrimSpace(parts[0]), "<>")
			for _, p := range parts[1:] {
				if strings.ReplaceAll(strings.TrimSpace(p), " ", "") == `rel="next"` {
					if u, err := base.Parse(target); err == nil {
						return u.String()
					}
				}
			}
		}
	}
	return ""
}

// hubEntry is one entry of GET /api/models/{repo}/tree/{rev}?recursive=true.
type hubEntry struct {
	Type string `json:"type"` // "file" or "directory"
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"` // git blob sha1
	LFS  *struct {
		OID  string `json:"oid"` // sha256 of the content
		Size int64  `json:"size"`
	} `json:"lfs,omitempty"`
}

func (h *hubClient) apiURL(repo string, parts ...string) string {
	u := h.cfg.Endpoint + "/api/models/" + repo
	for _, p := range parts {
		u += "/" + url.PathEscape(p)
	}
	return u
}

// revision resolves rev ("main", a tag, a commit) to a commit sha with
// GET /api/models/{repo}/revision/{rev}.
func (h *hubClient) revision(ctx context.Context, repo, rev string) (string, error) {
	var info struct {
		SHA string `json:"sha"`
	}
	if _, err := h.getJSON(ctx, h.apiURL(repo, "revision", rev), &info); err != nil {
		return "", fmt.Errorf("resolve %s@%s: %w", repo, rev, err)
	}
	if info.SHA == "" {
		return "", fmt.Errorf("resolve %s@%s: the hub answered no commit", repo, rev)
	}
	return info.SHA, nil
}

// tree lists every file of repo at commit, following pagination.
func (h *hubClient) tree(ctx context.Context, repo, commit string) ([]hubEntry, error) {
	u := h.apiURL(repo, "tree", commit) + "?recursive=true"
	var all []hubEntry
	for page := 0; u != ""; page++ {
		if page >= 1000 {
			return nil, fmt.Errorf("list %s: more than 1000 pages", repo)
		}
		var entries []hubEntry
		next, err := h.getJSON(ctx, u, &entries)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", repo, err)
		}
		for _, e := range entries {
			if e.Type == "file" {
				if err := models.CheckModelPath(e.Path); err != nil {
					return nil, fmt.Errorf("list %s: %w", repo, err)
				}
				all = append(all, e)
			}
		}
		u = next
	}
	return all, nil
}

// resolveURL is where the hub serves a file: {endpoint}/{repo}/resolve/{rev}/{path}.
func (h *hubClient) resolveURL(repo, commit, p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return h.cfg.Endpoint + "/" + repo + "/resolve/" + url.PathEscape(commit) + "/" + strings.Join(segs, "/")
}

// fileMeta is what a HEAD of a resolve URL says about a file.
type fileMeta struct {
	location string // URL to GET the bytes from (the CDN for LFS files)
	etag     string // X-Linked-Etag (sha256 of an LFS file) or ETag, unquoted
	linked   bool   // etag came from X-Linked-Etag
	size     int64  // X-Linked-Size or Content-Length; -1 unknown
	commit   string // X-Repo-Commit
}

// head asks for a file's metadata the way huggingface_hub does: HEAD without
// following redirects, except those to the same host (a renamed repository);
// a redirect to another host ends the walk, and its Location is where the
// bytes are (the token is not sent there). Servers that refuse HEAD give an
// empty fileMeta with location u.
func (h *hubClient) head(ctx context.Context, u string) (fileMeta, error) {
	c := *h.cfg.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cur := u
	for hop := 0; hop < 10; hop++ {
		req, err := h.newRequest(ctx, http.MethodHead, cur)
		if err != nil {
			return fileMeta{}, err
		}
		req.Header.Set("Accept-Encoding", "identity")
		if err := h.cfg.guard.checkURL(req.URL); err != nil {
			return fileMeta{}, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return fileMeta{}, redactURLError(err)
		}
		_ = resp.Body.Close() // HEAD: no body
		meta := fileMeta{location: cur, size: -1, commit: resp.Header.Get("X-Repo-Commit")}
		if e := resp.Header.Get("X-Linked-Etag"); e != "" {
			meta.etag, meta.linked = normalizeETag(e), true
		} else {
			meta.etag = normalizeETag(resp.Header.Get("ETag"))
		}
		for _, k := range []string{"X-Linked-Size", "Content-Length"} {
			if v := resp.Header.Get(k); v != "" {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
					meta.size = n
					break
				}
			}
		}
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				return fileMeta{}, fmt.Errorf("HEAD %s: redirect without a usable Location: %w", models.RedactURL(cur), err)
			}
			if err := checkRedirect(req.URL, loc, h.cfg.guard); err != nil {
				return fileMeta{}, fmt.Errorf("HEAD %s: %w", models.RedactURL(cur), err)
			}
			if sameHost(loc, req.URL) {
				cur = loc.String()
				continue
			}
			meta.location = loc.String()
			return meta, nil
		case resp.StatusCode == http.StatusOK:
			return meta, nil
		case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
			return fileMeta{location: cur, size: -1}, nil
		default:
			return fileMeta{}, &statusError{Code: resp.StatusCode, URL: cur}
		}
	}
	return fileMeta{}, fmt.Errorf("HEAD %s: too many redirects", models.RedactURL(u))
}

// normalizeETag drops a weak prefix and quotes.
func normalizeETag(e string) string {
	e = strings.TrimPrefix(strings.TrimSpace(e), "W/")
	return strings.Trim(e, `"`)
}
