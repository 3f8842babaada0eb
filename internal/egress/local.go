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

// hostClass is Classify, with the host's own addresses as ClassHost.
func hostClass(a netip.Addr) Class {
	c := Classify(a)
	if c == ClassPublic && localAddrs.has(a) {
		return ClassHost
	}
	return c
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
