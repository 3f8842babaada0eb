package egress

import (
	"net"
	"net/netip"
	"slices"
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

// TestEmbeddedForms checks that an IPv6 form carrying one of this host's
// IPv4 addresses, or an address a deny rule names, is refused like it.
func TestEmbeddedForms(t *testing.T) {
	v4 := netip.MustParseAddr("8.8.4.4")
	tests := []struct {
		name string
		addr string
	}{
		{"NAT64", "64:ff9b::808:404"},
		{"6to4", "2002:808:404::1"},
		{"mapped", "::ffff:8.8.4.4"},
	}
	pol, err := ParsePolicy([]string{"allowed.test"}, []string{"8.8.4.4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		got := embedded(a)
		if !slices.Contains(got, v4) {
			t.Errorf("%s: embedded(%s) = %v, want it to carry %s", tt.name, a, got, v4)
		}
		if _, ok := pol.checkAddr(netip.AddrPortFrom(a, 443)); ok {
			t.Errorf("%s: %s passed a --deny 8.8.4.4 rule", tt.name, a)
		}
	}
}

func TestClip(t *testing.T) {
	long := string(make([]byte, 60000))
	if got := clip(long); len(got) > maxEventField+3 {
		t.Errorf("clip of 60000 bytes kept %d, want at most %d", len(got), maxEventField+3)
	}
	if got := clip("CONNECT"); got != "CONNECT" {
		t.Errorf("clip(CONNECT) = %q", got)
	}
}
