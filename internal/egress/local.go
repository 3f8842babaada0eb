package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// ClassHost is an address of one of this host's own interfaces: a public
// address too, on most servers, where services Warden's operator runs
// (warden serve itself, SSH, databases listening on all addresses) would
// answer a sandbox that reached it. Classify cannot know it; the proxy
// asks the kernel.
const ClassHost Class = "host"

// hostClass is Classify, with the host's own addresses as ClassHost,
// also when carried inside an IPv6 form that embeds IPv4 (a NAT64 or
// 6to4 translator on the way would deliver it to the host).
func hostClass(a netip.Addr) Class {
	c := Classify(a)
	if c != ClassPublic {
		return c
	}
	for _, e := range embedded(a) {
		if localAddrs.has(e) {
			return ClassHost
		}
	}
	return c
}

// embedded is a and every IPv4 address an IPv6 form of it carries, the
// forms Classify judges by their IPv4 address.
func embedded(a netip.Addr) []netip.Addr {
	a = a.Unmap().WithZone("")
	out := []netip.Addr{a}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	switch {
	case a == addrV6Unspecified || a == addrV6Loopback:
	case addrCompat.Contains(a), addrNAT64.Contains(a), addrNAT64Local.Contains(a):
		out = append(out, addrV4(b[12:16]))
	case addrTeredo.Contains(a):
		out = append(out, addrV4([]byte{^b[12], ^b[13], ^b[14], ^b[15]}), addrV4(b[4:8]))
	case addr6to4.Contains(a):
		out = append(out, addrV4(b[2:6]))
	}
	return out
}

// localAddrsTTL is how long the host's address list is reused: addresses
// change rarely, and a dial should not list every interface.
const localAddrsTTL = time.Second

// localAddrs is the host's interface addresses, read again once stale.
var localAddrs = &addrCache{}

type addrCache struct {
	mu    sync.Mutex
	read  time.Time
	addrs map[netip.Addr]bool
}

// has reports whether a is one of the host's addresses. When the list
// cannot be read it answers true: the safe side for a proxy.
func (c *addrCache) has(a netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addrs == nil || time.Since(c.read) > localAddrsTTL {
		ifaddrs, err := net.InterfaceAddrs()
		if err != nil {
			return true
		}
		c.addrs = make(map[netip.Addr]bool, len(ifaddrs))
		for _, ia := range ifaddrs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				c.addrs[p.Addr().Unmap()] = true
			}
		}
		c.read = time.Now()
	}
	return c.addrs[a.Unmap().WithZone("")]
}
