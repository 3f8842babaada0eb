package egress

// This file classifies IP addresses for the egress policy: the proxy may
// connect only to public addresses, however an internal address is written.

import (
	"net/netip"
	"slices"
)

// Class is what kind of address an IP is, for the egress policy. Every class
// but ClassPublic names addresses that can reach the host itself, its
// networks or cloud metadata, or that have no business being dialled at all.
type Class string

// The classes. Ranges are listed with each; Classify documents how IPv6
// forms that carry an IPv4 address are judged.
const (
	// ClassPublic is everything not listed below: the only class the proxy
	// may dial.
	ClassPublic Class = "public"
	// ClassLoopback is 127.0.0.0/8 and ::1: services on the host itself.
	ClassLoopback Class = "loopback"
	// ClassPrivate is 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16 (RFC 1918).
	ClassPrivate Class = "private"
	// ClassLinkLocal is 169.254.0.0/16, home of the cloud metadata service
	// 169.254.169.254, and fe80::/10.
	ClassLinkLocal Class = "link-local"
	// ClassCGNAT is 100.64.0.0/10 (RFC 6598), used inside clouds and carriers
	// (Alibaba's metadata service is 100.100.100.200).
	ClassCGNAT Class = "cgnat"
	// ClassUniqueLocal is fc00::/7, IPv6's private networks (AWS's IPv6
	// metadata service is fd00:ec2::254).
	ClassUniqueLocal Class = "unique-local"
	// ClassMulticast is 224.0.0.0/4 and ff00::/8.
	ClassMulticast Class = "multicast"
	// ClassUnspecified is 0.0.0.0/8 ("this network"; Linux delivers a
	// connect to 0.0.0.0 to the host itself) and ::. The zero netip.Addr,
	// which is no address, is ClassUnspecified too.
	ClassUnspecified Class = "unspecified"
	// ClassBroadcast is 255.255.255.255.
	ClassBroadcast Class = "broadcast"
	// ClassReserved is every other special-purpose range. None holds a host
	// that sandboxed code needs, so refusing them costs nothing, while some
	// networks use them internally:
	//   - IPv4: 240.0.0.0/4 but the broadcast address (future use),
	//     192.0.0.0/24 (IETF protocol assignments), 192.0.2.0/24,
	//     198.51.100.0/24 and 203.0.113.0/24 (documentation), 192.88.99.0/24
	//     (deprecated 6to4 relay anycast) and 198.18.0.0/15 (benchmarking);
	//   - IPv6: everything outside 2000::/3, the only block IANA allocates
	//     for global unicast (this covers 100::/64 discard-only, the
	//     deprecated site-local fec0::/10 that some stacks still treat as
	//     local, the IPv4-translated ::ffff:0:a.b.c.d and the unassigned rest
	//     of 64:ff9b::/16), and within it 2001::/23 (IETF protocol
	//     assignments, Teredo excepted), 2001:db8::/32 and 3fff::/20
	//     (documentation).
	ClassReserved Class = "reserved"
	// ClassMetadata is a cloud platform's metadata or agent endpoint at a
	// public-looking address: Azure's WireServer, 168.63.129.16, which
	// hands out the VM's configuration (the usual metadata address,
	// 169.254.169.254, is link-local already).
	ClassMetadata Class = "cloud-metadata"
)

// Allowed says whether the proxy may connect to an address of class c: only
// ClassPublic, so that a class added later is refused until judged.
func (c Class) Allowed() bool { return c == ClassPublic }

// Classify says what a is. A zone (fe80::1%eth0) does not change the class.
//
// IPv6 forms that carry an IPv4 address are judged by that address, since a
// stack or translator on the way may deliver them to it:
//   - IPv4-mapped ::ffff:a.b.c.d;
//   - IPv4-compatible ::a.b.c.d (deprecated, but some stacks still
//     route it); :: and ::1 keep their IPv6 meaning, so ::2 is 0.0.0.2;
//   - NAT64 64:ff9b::/96 (RFC 6052), the last 32 bits;
//   - local-use NAT64 64:ff9b:1::/48 (RFC 8215), the last 32 bits when bits
//     48–95 are zero (64:ff9b:1::a.b.c.d). Any other address in the /48 is
//     ClassReserved: under a translator with a shorter prefix (RFC 6052
//     allows /48 to /64) it would carry a different IPv4 address in the
//     middle bits, and we cannot know the translator's prefix length;
//   - 6to4 2002:AABB:CCDD::/48, whose IPv4 address is AABBCCDD;
//   - Teredo 2001:0::/32, which carries two IPv4 addresses: the server's in
//     bits 32–63 and the client's, inverted, in the last 32 bits. The
//     client's class is returned if it is not public, else the server's: it
//     is public only if both are.
//
// Other addresses that embed IPv4 in their interface identifier, such as
// ISATAP, are routed by their prefix and judged by it.
func Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return ClassUnspecified
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return addrLookup(addrV4Ranges, a, ClassPublic)
	}
	b := a.As16()
	switch {
	case a == addrV6Unspecified:
		return ClassUnspecified
	case a == addrV6Loopback:
		return ClassLoopback
	case addrCompat.Contains(a), addrNAT64.Contains(a):
		return Classify(addrV4(b[12:16]))
	case addrNAT64Local.Contains(a):
		if b[6]|b[7]|b[8]|b[9]|b[10]|b[11] != 0 {
			return ClassReserved
		}
		return Classify(addrV4(b[12:16]))
	case addrTeredo.Contains(a):
		client := Classify(addrV4([]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
		if client != ClassPublic {
			return client
		}
		return Classify(addrV4(b[4:8]))
	case addr6to4.Contains(a):
		return Classify(addrV4(b[2:6]))
	case !addrGlobal.Contains(a):
		return addrLookup(addrV6Ranges, a, ClassReserved)
	}
	return addrLookup(addrV6Ranges, a, ClassPublic)
}

// addrRange is a block of addresses of one class.
type addrRange struct {
	prefix netip.Prefix
	class  Class
}

// addrV4Ranges are the non-public IPv4 blocks, searched in order.
var addrV4Ranges = []addrRange{
	{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), ClassLoopback},
	{netip.MustParsePrefix("168.63.129.16/32"), ClassMetadata},
	{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.88.99.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), ClassReserved},
	{netip.MustParsePrefix("198.51.100.0/24"), ClassReserved},
	{netip.MustParsePrefix("203.0.113.0/24"), ClassReserved},
	{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), ClassBroadcast}, // before 240/4
	{netip.MustParsePrefix("240.0.0.0/4"), ClassReserved},
}

// addrV6Ranges are the non-public IPv6 blocks that carry no IPv4 address,
// searched in order.
var addrV6Ranges = []addrRange{
	{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
	{netip.MustParsePrefix("fc00::/7"), ClassUniqueLocal},
	{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
	{netip.MustParsePrefix("2001::/23"), ClassReserved},
	{netip.MustParsePrefix("2001:db8::/32"), ClassReserved},
	{netip.MustParsePrefix("3fff::/20"), ClassReserved},
}

// The IPv6 blocks Classify treats specially.
var (
	addrV6Unspecified = netip.IPv6Unspecified()
	addrV6Loopback    = netip.IPv6Loopback()
	addrCompat        = netip.MustParsePrefix("::/96")
	addrNAT64         = netip.MustParsePrefix("64:ff9b::/96")
	addrNAT64Local    = netip.MustParsePrefix("64:ff9b:1::/48")
	addrTeredo        = netip.MustParsePrefix("2001::/32")
	addr6to4          = netip.MustParsePrefix("2002::/16")
	addrGlobal        = netip.MustParsePrefix("2000::/3")
)

// Blocks are Classify's own tables, for a check that another layer
// refuses what the proxy refuses (deploy/'s NetworkPolicies, in
// internal/kubebed's TestNetworkPolicies), so the two cannot drift.
type Blocks struct {
	// Refused are the blocks refused whole: every non-public IPv4
	// block, and the IPv6 blocks that carry no IPv4 address.
	Refused []netip.Prefix
	// Embedding are the IPv6 blocks judged by the IPv4 address they
	// carry (IPv4-compatible, NAT64, Teredo, 6to4): refused when that
	// address is not public.
	Embedding []netip.Prefix
	// Global is IPv6 global unicast: outside it and Embedding, every
	// address is refused.
	Global netip.Prefix
}

// RefusedBlocks are the blocks Classify refuses, as Blocks describes.
func RefusedBlocks() Blocks {
	b := Blocks{Embedding: []netip.Prefix{addrCompat, addrNAT64, addrNAT64Local, addrTeredo, addr6to4}, Global: addrGlobal}
	for _, r := range append(slices.Clone(addrV4Ranges), addrV6Ranges...) {
		b.Refused = append(b.Refused, r.prefix)
	}
	return b
}

// addrLookup returns the class of the first range holding a, or otherwise.
func addrLookup(ranges []addrRange, a netip.Addr, otherwise Class) Class {
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	return otherwise
}

// addrV4 is the IPv4 address in the 4 bytes b.
func addrV4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }
