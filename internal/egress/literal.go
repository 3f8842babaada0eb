package egress

// This file recognises IP literals in every notation a client library or
// resolver might accept, so that no address reaches the network unjudged.

import (
	"net/netip"
	"strings"
)

// ParseHostLiteral recognises host, the host of a request line or CONNECT
// authority with any port already split off, as an IP literal, in any
// notation that inet_aton, getaddrinfo or a WHATWG URL parser might accept,
// and returns the address it denotes. Policy must judge that address, not
// the spelling: "0x7f.1" is 127.0.0.1.
//
// One pair of surrounding brackets is removed first. What remains is:
//   - IPv6, if it contains a colon: the syntax of netip.ParseAddr, zone
//     included ("::1%lo"); the address is returned as written, so
//     "::ffff:7f00:1" stays IPv4-mapped (Classify judges it as 127.0.0.1);
//   - otherwise IPv4 in inet_aton's notation, optionally followed by one
//     dot ("127.0.0.1."): one to four dot-separated parts, each decimal,
//     octal after a leading 0 ("0177"), or hexadecimal after 0x or 0X
//     ("0x7F"; a bare "0x" is 0, as in WHATWG URLs), where every part but
//     the last is one byte and the last fills the remaining bytes ("127.1"
//     and "2130706433" are 127.0.0.1). A part too large for its bytes, an
//     8 or 9 in an octal part, an empty part or a fifth part makes host not
//     a literal.
//
// ok reports that host is a literal and addr is its address. numeric reports
// that host was meant as a literal: it is true when ok is, when host had
// brackets or contains a colon (no DNS name does), or when its last
// dot-separated label, ignoring trailing dots, is a number in the notation
// above (no top-level domain is numeric, and WHATWG URL parsers treat such a
// host as IPv4). A host with numeric true but ok false ("256.1.1.1",
// "099.0.0.1", "0x1ffffffff", "1.2.3.4.5", "[::1]:80") must be refused, not
// resolved: some resolver or library on the way might still read an address
// into it that policy never saw. A host with both false is a name; the
// caller resolves it and must Classify every address it dials.
func ParseHostLiteral(host string) (addr netip.Addr, ok bool, numeric bool) {
	s, bracketed := host, false
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s, bracketed = s[1:len(s)-1], true
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false, true
		}
		return a, true, true
	}
	if a, ok := litParseV4(s); ok {
		return a, true, true
	}
	return netip.Addr{}, false, bracketed || litIsNumber(litLastLabel(s))
}

// litParseV4 parses s in inet_aton's notation, as ParseHostLiteral describes.
func litParseV4(s string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint32
	for i, p := range parts {
		n, ok := litParseNumber(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v |= uint32(n) << (24 - 8*i)
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= uint32(n)
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// litParseNumber parses one part of an inet_aton address: decimal, octal
// after a leading 0, or hexadecimal after 0x or 0X. It fails on an empty
// part, a stray character or a value over 32 bits.
func litParseNumber(p string) (uint64, bool) {
	base, digits := uint64(10), p
	switch {
	case strings.HasPrefix(p, "0x"), strings.HasPrefix(p, "0X"):
		base, digits = 16, p[2:]
	case p == "":
		return 0, false
	case p[0] == '0':
		base, digits = 8, p[1:]
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		d, ok := litDigit(digits[i])
		if !ok || d >= base {
			return 0, false
		}
		if n = n*base + d; n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}

// litDigit is the value of the digit c in any base up to 16.
func litDigit(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// litLastLabel is the last dot-separated label of s once trailing dots are
// removed.
func litLastLabel(s string) string {
	s = strings.TrimRight(s, ".")
	return s[strings.LastIndexByte(s, '.')+1:]
}

// litIsNumber says whether label is written as a number: decimal digits, or
// 0x or 0X and hexadecimal digits. Its value and octal validity do not
// matter, only that it was meant as a number.
func litIsNumber(label string) bool {
	digits, hex := label, false
	if strings.HasPrefix(label, "0x") || strings.HasPrefix(label, "0X") {
		digits, hex = label[2:], true
	} else if label == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if d, ok := litDigit(digits[i]); !ok || (!hex && d > 9) {
			return false
		}
	}
	return true
}
