//go:build !slim

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
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warden-sandbox/warden/internal/egress"
)

// netGuard is the network policy of one pull. go-containerregistry
// follows a registry's redirects (to blob storage, usually) and fetches
// tokens from the realm its WWW-Authenticate names, both hosts the
// registry picks: a hostile registry must not bounce Warden's requests to
// an http downgrade or to a loopback, link-local or private address (a
// blind SSRF into the operator's network), unless the registry itself is
// on such an address (a local registry, and the tests'). The guard trusts
// the registry's host:port and the proxies' (what the operator chose),
// never a bare host on another port. It resolves the registry once, when
// it is made: it is open (no limits) only if the registry is a literal
// inside address, localhost, or resolves inside then; otherwise it dials
// the registry only at the addresses of that first resolution, checked
// outside, so the registry cannot rebind its own name to an inside
// address later. Every other host's name is checked as each request is
// sent (a clear error early, and the only check when a proxy dials for
// us), then, when dialing, resolved once more, every address checked, and
// only an address it checked dialed: a name that rebinds between the two
// lookups to an inside address is refused too.
type netGuard struct {
	registry string          // the registry's host:port, which the operator chose
	pinned   []netip.Addr    // the registry's addresses, checked outside; nil if not resolved
	open     bool            // the registry is itself local: no limits
	proxies  map[string]bool // proxy host:ports from the environment, the operator's too
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// newNetGuard makes the guard of a pull from registry (host or
// host:port) over scheme (https or http), resolving the registry's name
// now; lookup and dial are nil but in tests (the system resolver, and a
// net.Dialer). A registry that does not resolve now is checked when
// dialed, as any other host (a proxy may be the only way out).
func newNetGuard(ctx context.Context, registry, scheme string, lookup func(context.Context, string) ([]netip.Addr, error), dial func(context.Context, string, string) (net.Conn, error)) *netGuard {
	if lookup == nil {
		lookup = resolve
	}
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	g := &netGuard{registry: hostPort(registry, scheme), proxies: map[string]bool{}, lookup: lookup, dialer: dial}
	g.open, g.pinned = g.resolveRegistry(ctx, hostOf(registry))
	for _, sc := range []string{"https", "http"} {
		p, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: sc, Host: registry}})
		if err == nil && p != nil {
			g.proxies[hostPort(p.Host, p.Scheme)] = true
		}
	}
	return g
}

// resolveRegistry resolves the registry's host once: open if it is
// local, else the addresses to dial it at (nil if it did not resolve).
func (g *netGuard) resolveRegistry(ctx context.Context, host string) (bool, []netip.Addr) {
	if local(host) {
		return true, nil
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return false, nil
	}
	for _, a := range addrs {
		if inside(a) {
			return true, nil
		}
	}
	return false, addrs
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
	if err := t.g.checkName(req.Context(), hostPort(req.URL.Host, req.URL.Scheme)); err != nil {
		return nil, fmt.Errorf("registry sent the pull to %s: %w", req.URL.Redacted(), err)
	}
	return t.next.RoundTrip(req)
}

// trusted reports a host:port the operator chose: the registry, or a
// proxy.
func (g *netGuard) trusted(hostport string) bool {
	return g.open || hostport == g.registry || g.proxies[hostport]
}

// checkName refuses a host:port the registry picked whose host resolves
// to an inside address.
func (g *netGuard) checkName(ctx context.Context, hostport string) error {
	if g.trusted(hostport) {
		return nil
	}
	_, err := g.outside(ctx, hostOf(hostport))
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
var errForbidden = errors.New("an address inside the operator's network (loopback, private, link-local, CGNAT, reserved or metadata): refused")

// dial connects to addr through an address it has just resolved and,
// unless the host:port is trusted, checked, never letting the dialer
// resolve the name again; the registry (unless open) only at its pinned
// addresses.
func (g *netGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %q: %w", addr, err)
	}
	addrs, err := g.addrsOf(ctx, addr, host)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	var errs []error
	for _, a := range addrs {
		c, err := g.dialer(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// addrsOf are the addresses to dial host (of addr, its host:port) at.
func (g *netGuard) addrsOf(ctx context.Context, addr, host string) ([]netip.Addr, error) {
	switch {
	case addr == g.registry && g.pinned != nil:
		return g.pinned, nil
	case g.open || g.proxies[addr]:
		return g.lookup(ctx, host)
	}
	return g.outside(ctx, host)
}

// hostPort is host[:port] with the scheme's port when it names none.
func hostPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	port := "443"
	switch scheme {
	case "http":
		port = "80"
	case "socks5", "socks5h":
		port = "1080" // as net/http dials a proxy without one
	}
	return net.JoinHostPort(strings.Trim(hostport, "[]"), port)
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

// inside reports an address no public registry's redirect should reach:
// every address the sandbox egress policy refuses (loopback, private,
// link-local, CGNAT, unique-local, reserved, cloud metadata), judged by
// the IPv4 address an IPv6 form carries (mapped, compatible, NAT64,
// 6to4, Teredo): egress.Classify is the one list.
func inside(a netip.Addr) bool {
	return !egress.Classify(a).Allowed()
}
