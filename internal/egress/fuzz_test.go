package egress

import (
	"encoding/binary"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FuzzClassify compares Classify with addrRefClass, a reading of the same
// rules written as byte tests on the 16-byte form instead of prefix tables.
// Up to 4 bytes make an IPv4 address, more make an IPv6 one (zero-padded or
// cut to 16) with the zone.
func FuzzClassify(f *testing.F) {
	for _, c := range addrCases {
		a := netip.MustParseAddr(c.addr)
		f.Add(a.AsSlice(), a.Zone())
	}
	for _, c := range addrV4Targets {
		for _, a := range addrEmbed(netip.MustParseAddr(c.addr)) {
			f.Add(a.AsSlice(), a.Zone())
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, zone string) {
		var a netip.Addr
		if len(raw) <= 4 {
			var b [4]byte
			copy(b[:], raw)
			a = netip.AddrFrom4(b)
		} else {
			var b [16]byte
			copy(b[:], raw)
			a = netip.AddrFrom16(b).WithZone(zone)
		}
		if got, want := Classify(a), addrRefClass(a.As16()); got != want {
			t.Errorf("Classify(%v) = %s, want %s", a, got, want)
		}
	})
}

// addrRefClass is the class of the address b in its 16-byte form.
func addrRefClass(b [16]byte) Class {
	zero := func(from, to int) bool {
		for _, c := range b[from:to] {
			if c != 0 {
				return false
			}
		}
		return true
	}
	low := [4]byte{b[12], b[13], b[14], b[15]}
	switch {
	case zero(0, 10) && b[10] == 0xff && b[11] == 0xff:
		return addrRefClass4(low)
	case zero(0, 15) && b[15] <= 1:
		return []Class{ClassUnspecified, ClassLoopback}[b[15]]
	case zero(0, 12):
		return addrRefClass4(low)
	case b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(4, 12):
		return addrRefClass4(low)
	case b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1:
		if !zero(6, 12) {
			return ClassReserved
		}
		return addrRefClass4(low)
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0:
		if c := addrRefClass4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}); c != ClassPublic {
			return c
		}
		return addrRefClass4([4]byte{b[4], b[5], b[6], b[7]})
	case b[0] == 0x20 && b[1] == 0x02:
		return addrRefClass4([4]byte{b[2], b[3], b[4], b[5]})
	case b[0] == 0xfe && b[1]&0xc0 == 0x80:
		return ClassLinkLocal
	case b[0]&0xfe == 0xfc:
		return ClassUniqueLocal
	case b[0] == 0xff:
		return ClassMulticast
	case b[0]>>5 != 1, // outside 2000::/3
		b[0] == 0x20 && b[1] == 0x01 && b[2] <= 1,                    // 2001::/23
		b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8, // 2001:db8::/32
		b[0] == 0x3f && b[1] == 0xff && b[2] < 0x10:                  // 3fff::/20
		return ClassReserved
	}
	return ClassPublic
}

// addrRefClass4 is the class of the IPv4 address b.
func addrRefClass4(b [4]byte) Class {
	x, y, z := b[0], b[1], b[2]
	switch {
	case x == 0:
		return ClassUnspecified
	case x == 127:
		return ClassLoopback
	case x == 10, x == 172 && y>>4 == 1, x == 192 && y == 168:
		return ClassPrivate
	case x == 169 && y == 254:
		return ClassLinkLocal
	case b == [4]byte{168, 63, 129, 16}:
		return ClassMetadata
	case x == 100 && y>>6 == 1:
		return ClassCGNAT
	case x>>4 == 14:
		return ClassMulticast
	case b == [4]byte{255, 255, 255, 255}:
		return ClassBroadcast
	case x>>4 == 15,
		x == 192 && y == 0 && (z == 0 || z == 2),
		x == 192 && y == 88 && z == 99,
		x == 198 && y>>1 == 9,
		x == 198 && y == 51 && z == 100,
		x == 203 && y == 0 && z == 113:
		return ClassReserved
	}
	return ClassPublic
}

// FuzzParseHostLiteral compares ParseHostLiteral with litRefParse and
// litRefNumeric, and checks that every literal it accepts round-trips, is
// classified as the reference classifies it, and includes everything
// net.ParseIP accepts.
func FuzzParseHostLiteral(f *testing.F) {
	for _, c := range litCases {
		f.Add(c.host)
	}
	for _, c := range addrCases {
		f.Add(c.addr)
		f.Add("[" + c.addr + "]")
	}
	f.Fuzz(func(t *testing.T, host string) {
		addr, ok, numeric := ParseHostLiteral(host)
		wantAddr, wantOK := litRefParse(host)
		if addr != wantAddr || ok != wantOK {
			t.Fatalf("ParseHostLiteral(%q) = %v, %v, want %v, %v", host, addr, ok, wantAddr, wantOK)
		}
		if want := ok || litRefNumeric(host); numeric != want {
			t.Fatalf("ParseHostLiteral(%q) numeric = %v, want %v", host, numeric, want)
		}
		if ip := net.ParseIP(host); ip != nil && (!ok || addr.As16() != [16]byte(ip.To16())) {
			t.Fatalf("ParseHostLiteral(%q) = %v, %v, but net.ParseIP gives %v", host, addr, ok, ip)
		}
		if !ok {
			return
		}
		if got, want := Classify(addr), addrRefClass(wantAddr.As16()); got != want {
			t.Fatalf("Classify(%v) for %q = %s, want %s", addr, host, got, want)
		}
		if again, ok, _ := ParseHostLiteral(addr.String()); !ok || again != addr {
			t.Fatalf("ParseHostLiteral(%q) = %v, %v, want %v (from %q)", addr.String(), again, ok, addr, host)
		}
	})
}

// litRefParse is inet_aton's reading of host, with strconv doing each part,
// or net.ParseIP's when host has a colon.
func litRefParse(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") && len(host) > 1 {
		host = host[1 : len(host)-1]
	}
	if strings.Contains(host, ":") {
		ip, zone, hasZone := strings.Cut(host, "%")
		parsed := net.ParseIP(ip)
		if parsed == nil || !strings.Contains(ip, ":") || hasZone && zone == "" {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(parsed.To16())).WithZone(zone), true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) >= 2 && p[0] == '0':
			base = 8
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		shift := 8 * (3 - i)
		if i == len(parts)-1 {
			shift = 0
		}
		if shift > 0 && n > 255 || shift == 0 && n>>(8*(4-i)) != 0 {
			return netip.Addr{}, false
		}
		v += n << shift
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v))
	return netip.AddrFrom4(b), true
}

// litRefNumberAtEnd matches a host whose last label, before any trailing
// dots, is written as a number.
var litRefNumberAtEnd = regexp.MustCompile(`^(?:[^.]*\.)*(?:[0-9]+|0[xX][0-9a-fA-F]*)\.*$`)

// litRefNumeric says whether host was meant as a literal though it is not
// one: bracketed, with a colon, or ending in a number.
func litRefNumeric(host string) bool {
	return strings.Contains(host, ":") || len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' ||
		litRefNumberAtEnd.MatchString(host)
}
