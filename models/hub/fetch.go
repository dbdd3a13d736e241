package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/modeld/modeld/models"
)

// Fetch reads one small file from an http(s) URL through the pull's network
// guard: every connection's address is checked when dialled (a name that
// resolves to a loopback, private or link-local address is refused unless
// PullConfig.AllowPrivate), and every redirect as a pull's is. At most limit
// bytes are read; a longer body is an error. It is how the daemon reads a
// remote image when the user allows them (--allow-remote-images).
func (p *Puller) Fetch(ctx context.Context, rawURL string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL %s", models.RedactURL(rawURL))
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("%w to a %q URL", errRedirectRefused, req.URL.Scheme)
	}
	if err := p.cfg.guard.checkURL(req.URL); err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", p.cfg.UserAgent)
	c := *p.cfg.Client
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("%w: stopped after 10 redirects", errRedirectRefused)
		}
		return checkRedirect(via[len(via)-1].URL, r.URL, p.cfg.guard)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, redactURLError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", models.RedactURL(rawURL), resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, redactURLError(err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", models.RedactURL(rawURL), limit)
	}
	return b, nil
}
