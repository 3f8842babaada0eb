package template

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
)

// redirectGuard is the transport under every pull. go-containerregistry
// follows a registry's redirects (to blob storage, usually) itself, so
// the guard checks each redirected request as it is sent: a hostile
// registry must not bounce Warden's requests to an http downgrade or to
// a loopback, link-local or private address (a blind SSRF into the
// operator's network), unless the registry itself is on such an address
// (a local registry, and the tests').
type redirectGuard struct {
	next http.RoundTripper
}

// RoundTrip refuses a redirect the guard forbids, or sends req on.
func (g redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if via := req.Response; via != nil && via.Request != nil {
		if err := redirectAllowed(req.Context(), via.Request.URL, req.URL); err != nil {
			return nil, err
		}
	}
	return g.next.RoundTrip(req)
}

// redirectAllowed checks a redirect from from to to.
func redirectAllowed(ctx context.Context, from, to *url.URL) error {
	if from.Scheme == "https" && to.Scheme != "https" {
		return fmt.Errorf("registry redirected from https to %s (%s): refused", to.Scheme, to.Redacted())
	}
	if local(from.Hostname()) {
		return nil
	}
	ips, err := lookup(ctx, to.Hostname())
	if err != nil {
		return fmt.Errorf("registry redirected to %s: %w", to.Redacted(), err)
	}
	for _, ip := range ips {
		if inside(ip) {
			return fmt.Errorf("registry redirected to %s, a loopback, link-local or private address: refused", to.Redacted())
		}
	}
	return nil
}

// lookup resolves host, or parses it if it is an address.
func lookup(ctx context.Context, host string) ([]netip.Addr, error) {
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
