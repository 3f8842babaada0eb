package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
)

// errNotChecked is the dialer hook's refusal of an address other than the
// one the policy checked; it cannot happen unless the dialer resolves on
// its own, which is exactly what the hook exists to rule out.
var errNotChecked = errors.New("refusing an address the policy did not check")

// dial resolves an allowed host (a literal is used as is), checks every
// address and connects to the first allowed one that answers. It returns
// the connection, or the status and reason to refuse with.
func (x *exchange) dial(pol *Policy, v verdict, port int) (net.Conn, int, string) {
	ctx, cancel := context.WithTimeout(x.a.ctx, x.a.p.cfg.DialTimeout)
	defer cancel()
	addrs := []netip.Addr{v.literal}
	if !v.literal.IsValid() {
		var err error
		if addrs, err = x.a.p.resolve(ctx, v.host); err != nil {
			return nil, failStatus(err), fmt.Sprintf("cannot resolve %s: %s", v.host, shortErr(err))
		}
	}
	var refused []string
	var lastErr error
	for _, addr := range addrs {
		ap := netip.AddrPortFrom(addr, uint16(port))
		if why, ok := pol.checkAddr(ap); !ok {
			refused = append(refused, fmt.Sprintf("%s (%s)", addr, why))
			if x.ev.Address == "" {
				x.ev.Address = addr.String()
			}
			continue
		}
		x.ev.Address = addr.String()
		c, err := dialChecked(ctx, ap)
		if err == nil {
			return c, 0, ""
		}
		if lastErr = err; ctx.Err() != nil {
			break
		}
	}
	switch {
	case lastErr != nil:
		return nil, failStatus(lastErr), fmt.Sprintf("cannot connect to %s: %s", x.ev.Address, shortErr(lastErr))
	case len(refused) == 0:
		return nil, http.StatusBadGateway, fmt.Sprintf("%s has no address", v.host)
	}
	const show = 4
	if len(refused) > show {
		refused = append(refused[:show], fmt.Sprintf("and %d more", len(refused)-show))
	}
	return nil, http.StatusForbidden, fmt.Sprintf("%s resolves only to %s, which the sandbox may never reach", v.host, strings.Join(refused, ", "))
}

// dialChecked connects to exactly ap. The Control hook runs just before
// connect(2) with the address the socket is about to reach, and refuses
// anything but ap or any address whose class is not allowed: the check
// and the connection cannot drift apart.
func dialChecked(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Control: func(network, address string, _ syscall.RawConn) error {
		got, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("refusing %s: %w", address, err)
		}
		if got.Addr().Unmap() != ap.Addr().Unmap() || got.Port() != ap.Port() {
			return errNotChecked
		}
		if c := classify(got.Addr()); !c.Allowed() {
			return fmt.Errorf("refusing %s: a %s address", got.Addr(), c)
		}
		return nil
	}}
	return d.DialContext(ctx, "tcp", ap.String())
}

// resolve looks host up in Config.Hosts, then with the resolver (A and
// AAAA), and returns its distinct addresses, IPv4-mapped ones unmapped.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, ok := p.hosts[host]
	if !ok {
		var err error
		if addrs, err = p.cfg.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// failStatus maps a resolve or dial failure to 504 for a timeout and 502
// for anything else.
func failStatus(err error) int {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// shortErr keeps the part of a network error an agent can act on
// ("connection refused", "no such host", "timed out").
func shortErr(err error) string {
	var dns *net.DNSError
	var sys *os.SyscallError
	switch {
	case failStatus(err) == http.StatusGatewayTimeout:
		return "timed out"
	case errors.As(err, &dns):
		return dns.Err
	case errors.As(err, &sys):
		return sys.Err.Error()
	}
	return err.Error()
}
