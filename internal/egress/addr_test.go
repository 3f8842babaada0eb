package egress

import (
	"net/netip"
	"testing"
)

// addrCase is one address and the class Classify must give it.
type addrCase struct {
	addr string
	want Class
}

// addrCases hold the first and last address of every range and the
// addresses just outside it.
var addrCases = []addrCase{
	{"0.0.0.0", ClassUnspecified},
	{"0.255.255.255", ClassUnspecified},
	{"1.0.0.0", ClassPublic},
	{"8.8.8.8", ClassPublic},
	{"9.255.255.255", ClassPublic},
	{"10.0.0.0", ClassPrivate},
	{"10.255.255.255", ClassPrivate},
	{"11.0.0.0", ClassPublic},
	{"100.63.255.255", ClassPublic},
	{"100.64.0.0", ClassCGNAT},
	{"100.100.100.200", ClassCGNAT}, // Alibaba Cloud metadata
	{"100.127.255.255", ClassCGNAT},
	{"100.128.0.0", ClassPublic},
	{"126.255.255.255", ClassPublic},
	{"127.0.0.0", ClassLoopback},
	{"127.0.0.1", ClassLoopback},
	{"127.255.255.255", ClassLoopback},
	{"128.0.0.0", ClassPublic},
	{"169.253.255.255", ClassPublic},
	{"169.254.0.0", ClassLinkLocal},
	{"169.254.169.254", ClassLinkLocal}, // AWS, GCP, Azure metadata
	{"168.63.129.16", ClassMetadata},    // Azure WireServer
	{"168.63.129.15", ClassPublic},
	{"168.63.129.17", ClassPublic},
	{"169.254.170.2", ClassLinkLocal}, // ECS task metadata
	{"169.254.255.255", ClassLinkLocal},
	{"169.255.0.0", ClassPublic},
	{"172.15.255.255", ClassPublic},
	{"172.16.0.0", ClassPrivate},
	{"172.31.255.255", ClassPrivate},
	{"172.32.0.0", ClassPublic},
	{"191.255.255.255", ClassPublic},
	{"192.0.0.0", ClassReserved},
	{"192.0.0.255", ClassReserved},
	{"192.0.1.0", ClassPublic},
	{"192.0.1.255", ClassPublic},
	{"192.0.2.0", ClassReserved},
	{"192.0.2.255", ClassReserved},
	{"192.0.3.0", ClassPublic},
	{"192.88.98.255", ClassPublic},
	{"192.88.99.0", ClassReserved},
	{"192.88.99.255", ClassReserved},
	{"192.88.100.0", ClassPublic},
	{"192.167.255.255", ClassPublic},
	{"192.168.0.0", ClassPrivate},
	{"192.168.255.255", ClassPrivate},
	{"192.169.0.0", ClassPublic},
	{"198.17.255.255", ClassPublic},
	{"198.18.0.0", ClassReserved},
	{"198.19.255.255", ClassReserved},
	{"198.20.0.0", ClassPublic},
	{"198.51.99.255", ClassPublic},
	{"198.51.100.0", ClassReserved},
	{"198.51.100.255", ClassReserved},
	{"198.51.101.0", ClassPublic},
	{"203.0.112.255", ClassPublic},
	{"203.0.113.0", ClassReserved},
	{"203.0.113.255", ClassReserved},
	{"203.0.114.0", ClassPublic},
	{"223.255.255.255", ClassPublic},
	{"224.0.0.0", ClassMulticast},
	{"239.255.255.255", ClassMulticast},
	{"240.0.0.0", ClassReserved},
	{"255.255.255.254", ClassReserved},
	{"255.255.255.255", ClassBroadcast},

	{"::", ClassUnspecified},
	{"::1", ClassLoopback},
	{"::1%lo", ClassLoopback},
	{"::2", ClassUnspecified}, // IPv4-compatible 0.0.0.2
	{"::ffff:ffff", ClassBroadcast},
	{"::1:0:0", ClassReserved}, // between compatible and mapped
	{"::fffe:ffff:ffff", ClassReserved},
	{"::ffff:0:0", ClassUnspecified},
	{"::ffff:ffff:ffff", ClassBroadcast},
	{"::1:0:0:0", ClassReserved},
	{"::ffff:0:808:808", ClassReserved}, // IPv4-translated (SIIT)
	{"63:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"64:ff9b::", ClassUnspecified},
	{"64:ff9b::808:808", ClassPublic},
	{"64:ff9b::ffff:ffff", ClassBroadcast},
	{"64:ff9b::1:0:0", ClassReserved},
	{"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"64:ff9b:1::", ClassUnspecified},
	{"64:ff9b:1::808:808", ClassPublic},
	{"64:ff9b:1::ffff:ffff", ClassBroadcast},
	{"64:ff9b:1::1:808:808", ClassReserved},       // bit 95 set
	{"64:ff9b:1:7f00:0:1:808:808", ClassReserved}, // 127.0.0.1 in the /48 layout
	{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"64:ff9b:2::808:808", ClassReserved},
	{"100::", ClassReserved}, // discard-only
	{"100::ffff:ffff:ffff:ffff", ClassReserved},
	{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"2000::", ClassPublic},
	{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassPublic},
	{"2001::", ClassBroadcast},                                 // Teredo: client ^0 = 255.255.255.255
	{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", ClassUnspecified}, // Teredo: client 0.0.0.0
	{"2001:1::", ClassReserved},
	{"2001:1::1", ClassReserved}, // PCP anycast
	{"2001:2::", ClassReserved},  // benchmarking
	{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"2001:200::", ClassPublic},
	{"2001:4860:4860::8888", ClassPublic},
	{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ClassPublic},
	{"2001:db8::", ClassReserved},
	{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"2001:db9::", ClassPublic},
	{"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassPublic},
	{"2002::", ClassUnspecified},
	{"2002:808:808::", ClassPublic},
	{"2002:ffff:ffff::", ClassBroadcast},
	{"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassBroadcast},
	{"2003::", ClassPublic},
	{"2606:4700:4700::1111", ClassPublic},
	{"2606:4700:4700::1111%eth0", ClassPublic},
	{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassPublic},
	{"3fff::", ClassReserved},
	{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"3fff:1000::", ClassPublic},
	{"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassPublic},
	{"4000::", ClassReserved},
	{"5f00::", ClassReserved}, // SRv6 SIDs
	{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"fc00::", ClassUniqueLocal},
	{"fd00:ec2::254", ClassUniqueLocal}, // AWS IPv6 metadata
	{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassUniqueLocal},
	{"fe00::", ClassReserved},
	{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"fe80::", ClassLinkLocal},
	{"fe80::1%eth0", ClassLinkLocal},
	{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassLinkLocal},
	{"fec0::", ClassReserved}, // deprecated site-local
	{"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassReserved},
	{"ff00::", ClassMulticast},
	{"ff02::1", ClassMulticast},
	{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ClassMulticast},
}

func TestClassifyRanges(t *testing.T) {
	for _, c := range addrCases {
		if got := Classify(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Classify(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
}

func TestClassifyZeroAddr(t *testing.T) {
	if got := Classify(netip.Addr{}); got != ClassUnspecified {
		t.Errorf("Classify(netip.Addr{}) = %s, want %s", got, ClassUnspecified)
	}
}

// addrV4Targets are the IPv4 addresses whose embedded forms are checked,
// with their class.
var addrV4Targets = []addrCase{
	{"127.0.0.1", ClassLoopback},
	{"10.0.0.1", ClassPrivate},
	{"172.16.0.1", ClassPrivate},
	{"192.168.1.1", ClassPrivate},
	{"169.254.169.254", ClassLinkLocal},
	{"100.64.0.1", ClassCGNAT},
	{"0.0.0.0", ClassUnspecified},
	{"255.255.255.255", ClassBroadcast},
	{"224.0.0.1", ClassMulticast},
	{"240.0.0.1", ClassReserved},
	{"8.8.8.8", ClassPublic},
	{"1.1.1.1", ClassPublic},
}

// addrEmbed returns the IPv6 forms that carry v4, by name. The Teredo forms
// put v4 in one field and a public address in the other.
func addrEmbed(v4 netip.Addr) map[string]netip.Addr {
	b := v4.As4()
	pub := [4]byte{65, 54, 227, 120} // a Teredo server
	form := func(prefix []byte, at int, v [4]byte) netip.Addr {
		var a [16]byte
		copy(a[:], prefix)
		copy(a[at:], v[:])
		return netip.AddrFrom16(a)
	}
	inv := func(v [4]byte) [4]byte { return [4]byte{^v[0], ^v[1], ^v[2], ^v[3]} }
	teredo := []byte{0x20, 0x01, 0, 0}
	client := form(teredo, 12, inv(b)).As16()
	copy(client[4:], pub[:])
	client[8], client[10], client[11] = 0x80, 0xf2, 0x27 // flags and port
	server := form(teredo, 4, b).As16()
	copy(server[12:], []byte{^pub[0], ^pub[1], ^pub[2], ^pub[3]})
	sixToFour := form([]byte{0x20, 0x02}, 2, b).As16()
	copy(sixToFour[6:], []byte{0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 1})
	return map[string]netip.Addr{
		"mapped":        netip.AddrFrom16(v4.As16()),
		"mapped zoned":  netip.AddrFrom16(v4.As16()).WithZone("eth0"),
		"compatible":    form(nil, 12, b),
		"nat64":         form([]byte{0, 0x64, 0xff, 0x9b}, 12, b),
		"nat64 local":   form([]byte{0, 0x64, 0xff, 0x9b, 0, 1}, 12, b),
		"6to4":          form([]byte{0x20, 0x02}, 2, b),
		"6to4 subnet":   netip.AddrFrom16(sixToFour),
		"teredo client": netip.AddrFrom16(client),
		"teredo server": netip.AddrFrom16(server),
	}
}

func TestClassifyEmbedded(t *testing.T) {
	for _, c := range addrV4Targets {
		v4 := netip.MustParseAddr(c.addr)
		if got := Classify(v4); got != c.want {
			t.Errorf("Classify(%s) = %s, want %s", v4, got, c.want)
		}
		for name, a := range addrEmbed(v4) {
			if got := Classify(a); got != c.want {
				t.Errorf("Classify(%s) (%s %s) = %s, want %s", a, name, v4, got, c.want)
			}
		}
	}
}

func TestClassifyTeredoBothPrivate(t *testing.T) {
	// Server 10.0.0.1, client 127.0.0.1: the client's class wins.
	a := netip.MustParseAddr("2001:0:a00:1::80ff:fffe")
	if got := Classify(a); got != ClassLoopback {
		t.Errorf("Classify(%s) = %s, want %s", a, got, ClassLoopback)
	}
}

func TestClassAllowed(t *testing.T) {
	for _, c := range []Class{ClassPublic, ClassLoopback, ClassPrivate, ClassLinkLocal, ClassCGNAT,
		ClassUniqueLocal, ClassMulticast, ClassUnspecified, ClassBroadcast, ClassReserved, Class("")} {
		if got, want := c.Allowed(), c == ClassPublic; got != want {
			t.Errorf("Class(%q).Allowed() = %v, want %v", c, got, want)
		}
	}
}

// TestRefusedBlocks: every block RefusedBlocks names as refused whole
// is refused by Classify at its first and last address, and global
// unicast (outside the embedding blocks) is public; RefusedBlocks is
// the tables Classify reads, not a copy.
func TestRefusedBlocks(t *testing.T) {
	b := RefusedBlocks()
	if len(b.Refused) != len(addrV4Ranges)+len(addrV6Ranges) {
		t.Fatalf("RefusedBlocks has %d refused blocks, want all %d of Classify's", len(b.Refused), len(addrV4Ranges)+len(addrV6Ranges))
	}
	for _, p := range b.Refused {
		for _, a := range []netip.Addr{p.Addr(), lastAddr(p)} {
			if c := Classify(a); c == ClassPublic {
				t.Errorf("%s in the refused block %s: Classify = %s, want refused", a, p, c)
			}
		}
	}
	if a := netip.MustParseAddr("2606:4700::1"); !b.Global.Contains(a) || Classify(a) != ClassPublic {
		t.Errorf("global unicast %s: in %s %v, class %s; want public inside Global", a, b.Global, b.Global.Contains(a), Classify(a))
	}
}

// lastAddr is p's last address.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
