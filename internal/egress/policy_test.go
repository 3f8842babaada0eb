package egress

import (
	"bufio"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
)

// testPublic stands in for the internet: a documentation address (which
// Classify calls reserved) that the tests put on lo and count as public.
var testPublic = netip.MustParseAddr("203.0.113.7")

func TestMain(m *testing.M) {
	classify = func(a netip.Addr) Class {
		if a.Unmap().WithZone("") == testPublic {
			return ClassPublic
		}
		return Classify(a)
	}
	os.Exit(m.Run())
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		want        Policy
		wantErr     string
	}{
		{"names and ports", []string{"PyPI.org.", "*.Example.com:8443", "files.pythonhosted.org:443"}, []string{"bad.example.com"},
			Policy{Allow: []Rule{{"pypi.org", 0}, {"*.example.com", 8443}, {"files.pythonhosted.org", 443}}, Deny: []Rule{{"bad.example.com", 0}}}, ""},
		{"literals are canonical", []string{"203.0.113.7:80", "[2001:4860::8888]:443", "[::ffff:203.0.113.7]"}, []string{"[2001:4860::8844]"},
			Policy{Allow: []Rule{{"203.0.113.7", 80}, {"2001:4860::8888", 443}, {"203.0.113.7", 0}}, Deny: []Rule{{"2001:4860::8844", 0}}}, ""},
		{"deny may name a private address", nil, []string{"10.0.0.1:22"}, Policy{Deny: []Rule{{"10.0.0.1", 22}}}, ""},
		{"port zero", []string{"a.test:0"}, nil, Policy{}, `--allow rule "a.test:0": port "0" is not in 1..65535`},
		{"port too big", []string{"a.test:65536"}, nil, Policy{}, "not in 1..65535"},
		{"signed port", nil, []string{"a.test:+80"}, Policy{}, `--deny rule "a.test:+80"`},
		{"empty port", []string{"a.test:"}, nil, Policy{}, "not in 1..65535"},
		{"bare ipv6", []string{"2001:4860::8888"}, nil, Policy{}, "needs brackets"},
		{"bracketed name", []string{"[a.test]:80"}, nil, Policy{}, "is not an IPv6 address"},
		{"url", []string{"http://a.test/"}, nil, Policy{}, `--allow rule "http://a.test/"`},
		{"empty", []string{""}, nil, Policy{}, "not HOST[:PORT]"},
		{"bare star", []string{"*"}, nil, Policy{}, "not HOST[:PORT]"},
		{"inner star", []string{"a.*.test"}, nil, Policy{}, "not HOST[:PORT]"},
		{"wildcard of an address", []string{"*.0.0.1"}, nil, Policy{}, "a wildcard must be"},
		{"loopback allow", []string{"127.0.0.1:8080"}, nil, Policy{}, "127.0.0.1 (loopback) is an address the sandbox may never reach"},
		{"metadata allow in decimal", []string{"2852039166"}, nil, Policy{}, "169.254.169.254 (link-local) is an address"},
		{"invalid literal", []string{"256.1.1.1"}, nil, Policy{}, "256.1.1.1 is not a valid IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePolicy(tt.allow, tt.deny)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("ParsePolicy(%q, %q) error = %v, want one line containing %q", tt.allow, tt.deny, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParsePolicy(%q, %q) = %+v, %v; want %+v", tt.allow, tt.deny, got, err, tt.want)
			}
		})
	}
}

func mustPolicy(t testing.TB, allow, deny []string) Policy {
	t.Helper()
	pol, err := ParsePolicy(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return pol.withDefaults()
}

func TestCheckRules(t *testing.T) {
	pol := mustPolicy(t, []string{"*.example.com", "exact.test", "alt.test:8080", "203.0.113.7:443"},
		[]string{"bad.example.com", "evil.test"})
	tests := []struct {
		host       string
		port       int
		wantStatus int
		wantReason string
	}{
		{"sub.example.com", 443, 0, "--allow rule *.example.com"},
		{"a.b.example.com", 80, 0, "--allow rule *.example.com"},
		{"example.com", 443, 403, "no --allow rule matches (allowed: *.example.com, exact.test, alt.test:8080, 203.0.113.7:443)"},
		{"xexample.com", 443, 403, "no --allow rule matches"},
		{"sub.example.com.evil", 443, 403, "no --allow rule matches"},
		{"exact.test", 80, 0, "--allow rule exact.test"},
		{"exact.test", 443, 0, "--allow rule exact.test"},
		{"exact.test", 8080, 403, "no --allow rule matches"},
		{"sub.exact.test", 443, 403, "no --allow rule matches"},
		{"alt.test", 8080, 0, "--allow rule alt.test:8080"},
		{"alt.test", 443, 403, "no --allow rule matches"},
		{"bad.example.com", 443, 403, "--deny rule bad.example.com matches"},
		{"bad.example.com", 8443, 403, "--deny rule bad.example.com matches"},
		{"x.bad.example.com", 443, 0, "--allow rule *.example.com"},
		{"203.0.113.7", 443, 0, "--allow rule 203.0.113.7:443"},
		{"203.0.113.7", 80, 403, "no --allow rule matches"},
		{"0xcb007107", 443, 0, "--allow rule 203.0.113.7:443"},
		{"[::ffff:203.0.113.7]", 443, 0, "--allow rule 203.0.113.7:443"},
		{"8.8.8.8", 443, 403, "no --allow rule matches"},
		{"bad_name!", 443, 400, "not a valid host name"},
		{"a..b", 443, 400, "not a valid host name"},
	}
	for _, tt := range tests {
		v := pol.check(tt.host, tt.port)
		if v.status != tt.wantStatus || !strings.Contains(v.reason, tt.wantReason) {
			t.Errorf("check(%q, %d) = %d %q, want %d %q", tt.host, tt.port, v.status, v.reason, tt.wantStatus, tt.wantReason)
		}
	}
}

func TestCheckLiteralClasses(t *testing.T) {
	// Rules cannot open an address class: a deny-all-but policy naming
	// every spelling still refuses them.
	pol := mustPolicy(t, []string{"*.example.com"}, nil)
	tests := []struct{ host, want string }{
		{"127.1", "127.1 means 127.0.0.1 (loopback)"},
		{"0x7f000001", "0x7f000001 means 127.0.0.1 (loopback)"},
		{"0177.0.0.1", "means 127.0.0.1 (loopback)"},
		{"127.0.0.1.", "127.0.0.1 (loopback) is an address"},
		{"[::ffff:127.0.0.1]", "means 127.0.0.1 (loopback)"},
		{"[::1]", "::1 (loopback) is an address"},
		{"2852039166", "means 169.254.169.254 (link-local)"},
		{"169.254.169.254", "169.254.169.254 (link-local) is an address"},
		{"[fe80::1%25lo]", "(link-local)"},
		{"10.0.0.1", "(private)"},
		{"0xc0.0xa8.1", "means 192.168.0.1 (private)"},
		{"172.16.0.1", "(private)"},
		{"100.64.0.1", "(cgnat)"},
		{"[fd00:ec2::254]", "(unique-local)"},
		{"224.0.0.1", "(multicast)"},
		{"[ff02::1]", "(multicast)"},
		{"0.0.0.0", "(unspecified)"},
		{"0", "means 0.0.0.0 (unspecified)"},
		{"[::]", "(unspecified)"},
		{"255.255.255.255", "(broadcast)"},
		{"[64:ff9b::7f00:1]", "(loopback)"},
		{"[2002:7f00:1::]", "(loopback)"},
		{"[::127.0.0.1]", "(loopback)"},
		{"256.0.0.1", "256.0.0.1 is not a valid IP address"},
		{"0x1ffffffff", "is not a valid IP address"},
		{"1.2.3.4.5", "is not a valid IP address"},
	}
	for _, tt := range tests {
		// Through the request parser, as the proxy sees the host.
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("CONNECT " + tt.host + ":443 HTTP/1.1\r\n\r\n")))
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		host, port, err := target(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		v := pol.check(host, port)
		want := tt.want
		if v.status != http.StatusForbidden || !strings.Contains(v.reason, want) || !strings.Contains(v.reason, "never reach") && !strings.Contains(want, "not a valid") {
			t.Errorf("check(%q) = %d %q, want 403 containing %q", tt.host, v.status, v.reason, want)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	pol := mustPolicy(t, []string{"a.test"}, []string{"203.0.113.7:8443"})
	tests := []struct {
		ap     string
		wantOK bool
		why    string
	}{
		{"203.0.113.7:443", true, ""},
		{"203.0.113.7:8443", false, "--deny rule 203.0.113.7:8443"},
		{"[::ffff:203.0.113.7]:8443", false, "--deny rule 203.0.113.7:8443"},
		{"127.0.0.1:443", false, "loopback"},
		{"[::ffff:10.1.2.3]:443", false, "private"},
	}
	for _, tt := range tests {
		why, ok := pol.checkAddr(netip.MustParseAddrPort(tt.ap))
		if ok != tt.wantOK || why != tt.why {
			t.Errorf("checkAddr(%s) = %q, %v; want %q, %v", tt.ap, why, ok, tt.why, tt.wantOK)
		}
	}
}
