package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Where a pull may connect. A pull reference can come from a web page
// through the daemon's API, so a pull must not be a proxy into the machine
// or its network: unless PullConfig.AllowPrivate is set, every connection's
// address is checked when it is dialled (after DNS resolution, so a name that
// resolves, or later re-resolves, to 127.0.0.1 is refused as well), and every
// redirect is dialled through the same check. Exempt: the configured hub
// endpoint's own host:port (a local mirror set by the user's configuration
// keeps working; what it redirects to is checked) and the proxy from the
// environment (HTTPS_PROXY, HTTP_PROXY), which resolves names itself: through
// a proxy the target's addresses are resolved and checked before the request
// is handed to it.

// privateReason says why a must not be dialled by a pull, or "" when it may.
func privateReason(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, r := range reservedRanges {
		if r.p.Contains(a) {
			return r.reason
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a): // 64:ff9b::a.b.c.d reaches a.b.c.d
			return privateReason(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFour.Contains(a): // 2002:aabb:ccdd::/48 reaches aa.bb.cc.dd
			return privateReason(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	return ""
}

var (
	nat64Prefix    = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	reservedRanges = []struct {
		p      netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
		{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
		{netip.MustParsePrefix("fec0::/10"), "site-local"},
	}
)

// checkAddrPort is the default address rule: refuse what privateReason names.
func checkAddrPort(ap netip.AddrPort) error {
	if why := privateReason(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s is %s", models.ErrPrivateTarget, ap.Addr(), why)
	}
	return nil
}

// netGuard applies the address rule to one Puller's connections.
type netGuard struct {
	check    func(netip.AddrPort) error // nil: everything allowed
	endpoint string                     // the hub endpoint's dial address, never checked
	proxy    func(*http.Request) (*url.URL, error)
	resolve  func(ctx context.Context, host string) ([]netip.Addr, error)

	mu      sync.Mutex
	proxies map[string]bool // dial addresses of proxies in use, never checked
}

func newNetGuard(cfg *PullConfig) *netGuard {
	g := &netGuard{proxies: map[string]bool{}, proxy: http.ProxyFromEnvironment,
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}
	if !cfg.AllowPrivate {
		g.check = checkAddrPort
		if cfg.checkAddr != nil {
			g.check = cfg.checkAddr
		}
	}
	if u, err := url.Parse(cfg.Endpoint); err == nil && u.Host != "" {
		g.endpoint = canonicalAddr(u)
	}
	return g
}

// exempt reports whether the dial address addr is never checked.
func (g *netGuard) exempt(addr string) bool {
	addr = strings.ToLower(addr)
	if addr == g.endpoint {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proxies[addr]
}

// canonicalAddr is the "host:port" the transport dials for u.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// control runs for every socket the transport dials, with the resolved
// address: this is the check that DNS answers cannot get around.
func (g *netGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", models.ErrPrivateTarget, address)
	}
	return g.check(ap)
}

// dialContext dials addr, checking the connected address unless addr is exempt.
func (g *netGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if g.check != nil && !g.exempt(addr) {
		d.Control = g.control
	}
	return d.DialContext(ctx, network, addr)
}

// proxyFor returns the environment's proxy for req. A request that goes
// through a proxy has its target's addresses checked here, since the proxy,
// not this process, resolves and dials the target.
func (g *netGuard) proxyFor(req *http.Request) (*url.URL, error) {
	pu, err := g.proxy(req)
	if err != nil || g.check == nil {
		return pu, err
	}
	target := canonicalAddr(req.URL)
	if g.exempt(target) {
		if pu == nil && target != g.endpoint { // not through the proxy, to the proxy
			return nil, fmt.Errorf("%w: %s is the configured proxy", models.ErrPrivateTarget, target)
		}
		return pu, nil
	}
	if pu == nil {
		return nil, nil // dialled directly: the dial checks it
	}
	host, portText, _ := net.SplitHostPort(target)
	port, _ := netip.ParseAddrPort("0.0.0.0:" + portText)
	addrs, err := g.lookup(req.Context(), host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := g.check(netip.AddrPortFrom(a, port.Port())); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	g.proxies[canonicalAddr(pu)] = true // the proxy itself is the user's choice
	g.mu.Unlock()
	return pu, nil
}

// lookup resolves host (a literal address resolves to itself).
func (g *netGuard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	return addrs, nil
}

// checkURL refuses at once a URL whose host is a literal private address or
// a localhost name, so the error comes before any network access; names are
// checked when dialled.
func (g *netGuard) checkURL(u *url.URL) error {
	if g.check == nil || g.exempt(canonicalAddr(u)) {
		return nil
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("%w: %s is loopback", models.ErrPrivateTarget, host)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	_, portText, _ := net.SplitHostPort(canonicalAddr(u))
	ap, err := netip.ParseAddrPort(net.JoinHostPort(a.String(), portText))
	if err != nil {
		return nil
	}
	return g.check(ap)
}

// checkRedirect is the rule for every redirect a pull follows: http(s) only,
// never from https down to http (a plain-URL pull without a published sha256
// would take whatever a network attacker sends), and the target's literal
// address checked at once (names are checked when dialled).
func checkRedirect(from, to *url.URL, g *netGuard) error {
	switch strings.ToLower(to.Scheme) {
	case "https":
	case "http":
		if strings.EqualFold(from.Scheme, "https") {
			return fmt.Errorf("%w from https to http (%s)", errRedirectRefused, models.RedactURL(to.String()))
		}
	default:
		return fmt.Errorf("%w to a %q URL", errRedirectRefused, to.Scheme)
	}
	return g.checkURL(to)
}

// errRedirectRefused: a redirect the pull will not follow (not retried).
var errRedirectRefused = errors.New("refused redirect")
