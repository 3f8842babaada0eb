package egress

import (
	"net/netip"
	"testing"
)

// litCase is one host and what ParseHostLiteral must make of it; addr is ""
// when ok is false.
type litCase struct {
	host    string
	addr    string
	ok      bool
	numeric bool
}

// litAddr is a host that is a literal for addr.
func litAddr(host, addr string) litCase { return litCase{host, addr, true, true} }

// litCases are odd spellings of internal addresses, names, and hosts that
// were meant as numbers but are not valid literals.
var litCases = []litCase{
	litAddr("127.0.0.1", "127.0.0.1"),
	litAddr("127.0.0.1.", "127.0.0.1"),
	litAddr("127.000.000.001", "127.0.0.1"),
	litAddr("127.0.0.01", "127.0.0.1"),
	litAddr("127.1", "127.0.0.1"),
	litAddr("127.1.", "127.0.0.1"),
	litAddr("127.0.1", "127.0.0.1"),
	litAddr("127.0.00000000001", "127.0.0.1"),
	litAddr("2130706433", "127.0.0.1"),
	litAddr("2130706433.", "127.0.0.1"),
	litAddr("0x7f000001", "127.0.0.1"),
	litAddr("0X7F000001", "127.0.0.1"),
	litAddr("0x00000000007f000001", "127.0.0.1"),
	litAddr("0x7f.1", "127.0.0.1"),
	litAddr("0X7F.1", "127.0.0.1"),
	litAddr("0x7f.0.0.1", "127.0.0.1"),
	litAddr("0x7f.0x0.0x0.0x1", "127.0.0.1"),
	litAddr("0x7f.0x.0x.0x1", "127.0.0.1"),
	litAddr("0x7f.0.1", "127.0.0.1"),
	litAddr("0x7f.0x000001", "127.0.0.1"),
	litAddr("127.0x1", "127.0.0.1"),
	litAddr("127.0.0x1", "127.0.0.1"),
	litAddr("127.0.0.0x1", "127.0.0.1"),
	litAddr("0177.0.0.1", "127.0.0.1"),
	litAddr("0177.1", "127.0.0.1"),
	litAddr("0177.0.0.01", "127.0.0.1"),
	litAddr("00000177.0.0.1", "127.0.0.1"),
	litAddr("017700000001", "127.0.0.1"),
	litAddr("0177.0x0.00.1", "127.0.0.1"),
	litAddr("127.0.1.", "127.0.0.1"),
	litAddr("[127.0.0.1]", "127.0.0.1"),
	litAddr("[0x7f.1]", "127.0.0.1"),
	litAddr("127.0.0.2", "127.0.0.2"),
	litAddr("127.255.255.255", "127.255.255.255"),
	litAddr("::1", "::1"),
	litAddr("[::1]", "::1"),
	litAddr("[0:0:0:0:0:0:0:1]", "::1"),
	litAddr("0000:0000:0000:0000:0000:0000:0000:0001", "::1"),
	litAddr("[::1%lo]", "::1%lo"),
	litAddr("::1%lo", "::1%lo"),
	litAddr("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
	litAddr("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
	litAddr("::ffff:7f00:1", "::ffff:127.0.0.1"),
	litAddr("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
	litAddr("::FFFF:7F00:1", "::ffff:127.0.0.1"),
	litAddr("0:0:0:0:0:ffff:7f00:1", "::ffff:127.0.0.1"),
	litAddr("0:0:0:0:0:ffff:127.0.0.1", "::ffff:127.0.0.1"),
	litAddr("[::ffff:127.0.0.1%eth0]", "::ffff:127.0.0.1%eth0"),
	litAddr("::127.0.0.1", "::7f00:1"),
	litAddr("64:ff9b::127.0.0.1", "64:ff9b::7f00:1"),
	litAddr("64:ff9b:1::7f00:1", "64:ff9b:1::7f00:1"),
	litAddr("2002:7f00:1::", "2002:7f00:1::"),
	litAddr("[2002:7f00:1::1]", "2002:7f00:1::1"),
	litAddr("2001:0:808:808::80ff:fffe", "2001:0:808:808::80ff:fffe"), // Teredo client 127.0.0.1

	litAddr("169.254.169.254", "169.254.169.254"),
	litAddr("169.254.169.254.", "169.254.169.254"),
	litAddr("2852039166", "169.254.169.254"),
	litAddr("0xa9fea9fe", "169.254.169.254"),
	litAddr("0XA9FEA9FE", "169.254.169.254"),
	litAddr("025177524776", "169.254.169.254"),
	litAddr("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
	litAddr("0251.0376.0251.0376", "169.254.169.254"),
	litAddr("0251.254.0xa9.254", "169.254.169.254"),
	litAddr("169.254.43518", "169.254.169.254"),
	litAddr("0251.0xfe.43518", "169.254.169.254"),
	litAddr("169.16689662", "169.254.169.254"),
	litAddr("0xa9.16689662", "169.254.169.254"),
	litAddr("0xa9.077524776", "169.254.169.254"),
	litAddr("[169.254.169.254]", "169.254.169.254"),
	litAddr("[::ffff:169.254.169.254]", "::ffff:169.254.169.254"),
	litAddr("::ffff:a9fe:a9fe", "::ffff:169.254.169.254"),
	litAddr("fd00:ec2::254", "fd00:ec2::254"),

	litAddr("10.0.0.1", "10.0.0.1"),
	litAddr("10.0.0.1.", "10.0.0.1"),
	litAddr("10.1", "10.0.0.1"),
	litAddr("10.0.1", "10.0.0.1"),
	litAddr("167772161", "10.0.0.1"),
	litAddr("0xa000001", "10.0.0.1"),
	litAddr("0xA.1", "10.0.0.1"),
	litAddr("012.1", "10.0.0.1"),
	litAddr("012.0.0.1", "10.0.0.1"),
	litAddr("012.0.0.01", "10.0.0.1"),
	litAddr("00012.0.0.1", "10.0.0.1"),
	litAddr("01200000001", "10.0.0.1"),
	litAddr("0x0a.0x00.0x00.0x01", "10.0.0.1"),
	litAddr("10.0.0.0x1", "10.0.0.1"),
	litAddr("[::ffff:10.0.0.1]", "::ffff:10.0.0.1"),
	litAddr("::ffff:a00:1", "::ffff:10.0.0.1"),
	litAddr("10.2.3", "10.2.0.3"),
	litAddr("10.1.2", "10.1.0.2"),

	litAddr("0", "0.0.0.0"),
	litAddr("00", "0.0.0.0"),
	litAddr("0x", "0.0.0.0"),
	litAddr("0x0", "0.0.0.0"),
	litAddr("0.0", "0.0.0.0"),
	litAddr("0x.0x.0x.0x", "0.0.0.0"),
	litAddr("0.0.0.0.", "0.0.0.0"),
	litAddr("4294967295", "255.255.255.255"),
	litAddr("0xffffffff", "255.255.255.255"),
	litAddr("037777777777", "255.255.255.255"),
	litAddr("255.16777215", "255.255.255.255"),
	litAddr("255.255.65535", "255.255.255.255"),
	litAddr("1.16777215", "1.255.255.255"),
	litAddr("8.8.8.8", "8.8.8.8"),
	litAddr("134744072", "8.8.8.8"),
	litAddr("2606:4700:4700::1111", "2606:4700:4700::1111"),

	{"example.com", "", false, false},
	{"example.com.", "", false, false},
	{"1.example.com", "", false, false},
	{"1.2.3.4.example.com", "", false, false},
	{"127.0.0.1.nip.io", "", false, false},
	{"a.b", "", false, false},
	{"xn--80ak6aa92e.com", "", false, false},
	{"localhost", "", false, false},
	{"metadata.google.internal", "", false, false},
	{"0x7f.example", "", false, false},
	{"deadbeef", "", false, false},
	{"cafe.babe", "", false, false},
	{"1e3", "", false, false},
	{"1-2-3-4", "", false, false},
	{"0xg", "", false, false},
	{"x7f", "", false, false},
	{"", "", false, false},
	{".", "", false, false},
	{"[foo", "", false, false},

	{"256.256.256.256", "", false, true},
	{"127.0.0.256", "", false, true},
	{"0x100.0.0.1", "", false, true},
	{"1.2.3.4.5", "", false, true},
	{".127.0.0.1", "", false, true},
	{"127..0.1", "", false, true},
	{"127.0.0.1..", "", false, true},
	{"0x1ffffffff", "", false, true},
	{"4294967296", "", false, true},
	{"040000000000", "", false, true},
	{"1.16777216", "", false, true},
	{"1.2.65536", "", false, true},
	{"099.0.0.1", "", false, true},
	{"08", "", false, true},
	{"0x7g.1", "", false, true},
	{"x7f.1", "", false, true},
	{"example.123", "", false, true},
	{"example.0x1f", "", false, true},
	{"[example.com]", "", false, true},
	{"[]", "", false, true},
	{"[127.0.0.1", "", false, true},
	{"[::1", "", false, true},
	{"::1]", "", false, true},
	{"[::1]:80", "", false, true},
	{"127.0.0.1:80", "", false, true},
	{"::ffff:127.1", "", false, true},
	{"::ffff:0177.0.0.1", "", false, true},
	{"1::2::3", "", false, true},
	{"fe80::1%", "", false, true},
	{"::g", "", false, true},
}

func TestParseHostLiteral(t *testing.T) {
	for _, c := range litCases {
		addr, ok, numeric := ParseHostLiteral(c.host)
		var want netip.Addr
		if c.addr != "" {
			want = netip.MustParseAddr(c.addr)
		}
		if addr != want || ok != c.ok || numeric != c.numeric {
			t.Errorf("ParseHostLiteral(%q) = %v, %v, %v, want %v, %v, %v",
				c.host, addr, ok, numeric, want, c.ok, c.numeric)
		}
	}
}

// TestParseHostLiteralInternal checks that every spelling of an internal
// address above is refused once classified, and only those.
func TestParseHostLiteralInternal(t *testing.T) {
	for _, c := range litCases {
		addr, ok, _ := ParseHostLiteral(c.host)
		if !ok {
			continue
		}
		public := c.addr == "8.8.8.8" || c.addr == "1.255.255.255" || c.addr == "2606:4700:4700::1111"
		if got := Classify(addr).Allowed(); got != public {
			t.Errorf("Classify(%v).Allowed() for %q = %v, want %v", addr, c.host, got, public)
		}
	}
}
