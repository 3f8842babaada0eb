package template

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// netGuard is the network policy of one pull. go-containerregistry
// follows a registry's redirects (to blob storage, usually) and fetches
// tokens from the realm its WWW-Authenticate names, both hosts the
// registry picks: a hostile registry must not bounce Warden's requests to
// an http downgrade or to a loopback, link-local or private address (a
// blind SSRF into the operator's network), unless the registry itself is
// on such an address (a local registry, and the tests'). The guard checks
// every such host's name as each request is sent (a clear error early,
// and the only check when a proxy dials for us), then, when dialing,
// resolves the name once more, checks every address, and dials only an
// address it checked: a name that rebinds between the two lookups to an
// inside address is refused too.
type netGuard struct {
	registry string          // the registry's host, which the operator chose
	open     bool            // the registry is itself local: no limits
	proxies  map[string]bool // proxy hosts from the environment, the operator's too
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer   net.Dialer
}

// newNetGuard makes the guard of a pull from registry (host or
// host:port); lookup is nil for the system resolver.
func newNetGuard(registry string, lookup func(context.Context, string) ([]netip.Addr, error)) *netGuard {
	host := hostOf(registry)
	if lookup == nil {
		lookup = resolve
	}
	g := &netGuard{registry: host, open: local(host), proxies: map[string]bool{}, lookup: lookup,
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	for _, scheme := range []string{"https", "http"} {
		p, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: scheme, Host: registry}})
		if err == nil && p != nil {
			g.proxies[p.Hostname()] = true
		}
	}
	return g
}

// transport is the HTTP transport of a pull: go-containerregistry's
// default, dialing through the guard and sending every request through
// it; tlsConf is nil but in tests.
func (g *netGuard) transport(tlsConf *tls.Config) http.RoundTripper {
	base, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	tr.DialContext = g.dial
	if tlsConf != nil {
		tr.TLSClientConfig = tlsConf
	}
	return guardedTransport{g: g, next: tr}
}

// guardedTransport checks each request's host before sending it.
type guardedTransport struct {
	g    *netGuard
	next http.RoundTripper
}

// RoundTrip refuses a request the guard forbids, or sends req on.
func (t guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if via := req.Response; via != nil && via.Request != nil {
		from, to := via.Request.URL, req.URL
		if from.Scheme == "https" && to.Scheme != "https" {
			return nil, fmt.Errorf("registry redirected from https to %s (%s): refused", to.Scheme, to.Redacted())
		}
	}
	if err := t.g.checkName(req.Context(), req.URL.Hostname()); err != nil {
		return nil, fmt.Errorf("registry sent the pull to %s: %w", req.URL.Redacted(), err)
	}
	return t.next.RoundTrip(req)
}

// trusted reports a host the operator chose: the registry, or a proxy.
func (g *netGuard) trusted(host string) bool {
	return g.open || host == g.registry || g.proxies[host]
}

// checkName refuses a host the registry picked that resolves to an
// inside address.
func (g *netGuard) checkName(ctx context.Context, host string) error {
	if g.trusted(host) {
		return nil
	}
	_, err := g.outside(ctx, host)
	return err
}

// outside resolves host and returns its addresses, refusing it if any
// of them is inside.
func (g *netGuard) outside(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "localhost" {
		return nil, fmt.Errorf("%s is %w", host, errForbidden)
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolving %q: no addresses", host)
	}
	for _, a := range addrs {
		if inside(a) {
			return nil, fmt.Errorf("%s is %w", host, errForbidden)
		}
	}
	return addrs, nil
}

// errForbidden ends the error of a host the guard refuses.
var errForbidden = errors.New("a loopback, link-local or private address: refused")

// dial connects to addr through an address it has just resolved (and,
// unless the host is trusted, checked), never letting the dialer resolve
// the name again.
func (g *netGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %q: %w", addr, err)
	}
	var addrs []netip.Addr
	if g.trusted(host) {
		addrs, err = g.lookup(ctx, host)
	} else {
		addrs, err = g.outside(ctx, host)
	}
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	var errs []error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// hostOf is the host of host[:port].
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// resolve resolves host, or parses it if it is an address.
func resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", host, err)
	}
	return addrs, nil
}

// local reports a registry host that is itself loopback or private.
func local(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && inside(a)
}

// inside reports an address no public registry's redirect should reach.
func inside(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsPrivate() || a.IsUnspecified() || a.IsInterfaceLocalMulticast()
}
