package egress

import (
	"net"
	"net/netip"
	"testing"
)

// TestHostClass checks that every address of this host's interfaces is
// refused, public or not, and that other public addresses are not.
func TestHostClass(t *testing.T) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifaddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil {
			continue
		}
		if c := hostClass(p.Addr()); c.Allowed() {
			t.Errorf("hostClass(%s), an address of this host, = %s, want it refused", p.Addr(), c)
		}
	}
	if c := hostClass(netip.MustParseAddr("8.8.8.8")); c != ClassPublic && !localAddrs.has(netip.MustParseAddr("8.8.8.8")) {
		t.Errorf("hostClass(8.8.8.8) = %s, want public", c)
	}
}
