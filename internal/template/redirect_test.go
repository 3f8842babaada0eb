//go:build !slim

package template

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestInside classifies addresses a registry's redirect may name: every
// loopback, private, link-local, CGNAT, reserved or metadata address is
// inside, however IPv6 wraps it (mapped, compatible, NAT64, 6to4).
func TestInside(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", false},
		{"2606:4700::1111", false},
		{"127.0.0.1", true},
		{"10.1.2.3", true},
		{"169.254.169.254", true},
		{"100.64.0.1", true},
		{"100.100.100.200", true},
		{"100.127.255.254", true},
		{"198.18.0.1", true},
		{"198.19.255.254", true},
		{"192.0.0.8", true},
		{"168.63.129.16", true},
		{"::ffff:10.0.0.1", true},
		{"::10.0.0.1", true},
		{"::169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b::7f00:1", true},
		{"64:ff9b::808:808", false},
		{"2002:a9fe:a9fe::1", true},
		{"2002:6440:1::1", true},
		{"2002:808:808::1", false},
		{"fd00:ec2::254", true},
	}
	for _, tc := range tests {
		if got := inside(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("inside(%s): got %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestHostPort: a host without a port gets its scheme's, as net/http
// dials it, so the guard trusts exactly the registry's and proxies'.
func TestHostPort(t *testing.T) {
	tests := []struct{ in, scheme, want string }{
		{"example.com", "https", "example.com:443"},
		{"example.com", "http", "example.com:80"},
		{"example.com:5000", "https", "example.com:5000"},
		{"[::1]", "https", "[::1]:443"},
		{"proxy.internal", "socks5", "proxy.internal:1080"},
	}
	for _, tc := range tests {
		if got := hostPort(tc.in, tc.scheme); got != tc.want {
			t.Errorf("hostPort(%q, %q): got %q, want %q", tc.in, tc.scheme, got, tc.want)
		}
	}
}

// TestRedirectGuard checks which registry redirects a pull follows.
func TestRedirectGuard(t *testing.T) {
	tests := []struct {
		from, to string
		want     string // "" to allow
	}{
		{"https://8.8.8.8/v2/", "https://1.1.1.1/blob", ""},
		{"https://8.8.8.8/v2/", "http://1.1.1.1/blob", "from https to http"},
		{"https://8.8.8.8/v2/", "https://127.0.0.1/blob", "inside the operator's network"},
		{"https://8.8.8.8/v2/", "https://[::1]:5000/blob", "inside the operator's network"},
		{"https://8.8.8.8/v2/", "https://169.254.169.254/latest/meta-data", "inside the operator's network"},
		{"https://8.8.8.8/v2/", "https://10.1.2.3/blob", "inside the operator's network"},
		{"https://8.8.8.8/v2/", "https://[::ffff:192.168.1.1]/blob", "inside the operator's network"},
		{"https://8.8.8.8/v2/", "https://localhost/blob", "inside the operator's network"},
		{"http://127.0.0.1:5000/v2/", "http://127.0.0.1:5001/blob", ""},
		{"http://localhost:5000/v2/", "http://10.0.0.1/blob", ""},
	}
	for _, tc := range tests {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		var sent bool
		g := guardedTransport{g: newNetGuard(context.Background(), from.Host, from.Scheme, nil, nil), next: roundTripFunc(func(*http.Request) (*http.Response, error) {
			sent = true
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		})}
		req := (&http.Request{Method: http.MethodGet, URL: to, Header: http.Header{}}).WithContext(context.Background())
		req.Response = &http.Response{Request: &http.Request{URL: from}}
		_, err := g.RoundTrip(req)
		if tc.want == "" && (err != nil || !sent) || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || sent) {
			t.Errorf("%s -> %s: got %v (sent %v), want %q", tc.from, tc.to, err, sent, tc.want)
		}
	}
}

// publicAddr is where the test's stand-in DNS puts a name on its first
// lookup, and redirectPublic dials it at the loopback test servers (the
// tests never send a packet to it).
var publicAddr = netip.MustParseAddr("8.8.8.8")

// rebinding is a resolver standing in for DNS: every name (the
// registry's, example.com: httptest's certificate covers it and
// *.example.com, too) is public on its first lookup and loopback after
// it, as a DNS rebinding attacker answers.
func rebinding() func(context.Context, string) ([]netip.Addr, error) {
	var seen sync.Map
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, err := netip.ParseAddr(host); err == nil {
			return []netip.Addr{a}, nil
		}
		if _, again := seen.LoadOrStore(host, true); again {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{publicAddr}, nil
	}
}

// redirectPublic is a dialer standing in for the network: publicAddr is
// the loopback, so the test servers answer there.
func redirectPublic(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == publicAddr.String() {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestPullGuardsRebindingAndRealm pulls from a TLS registry public on
// its first lookup (example.com, on loopback behind a public address)
// whose names rebind to loopback after it. A pull it does not bounce
// works (dialed at the pinned first addresses); one it sends to names
// rebinding to loopback is refused: a blob redirect, a token realm from
// WWW-Authenticate, and a redirect to its own name on another port (an
// internal server). The loopback servers behind those never see a
// request.
func TestPullGuardsRebindingAndRealm(t *testing.T) {
	var hit atomic.Int32 // requests that reached a forbidden name
	internal := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	internal.StartTLS()
	t.Cleanup(internal.Close)
	internalPort := internal.URL[strings.LastIndex(internal.URL, ":")+1:]
	var mode atomic.Value
	mode.Store("")
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var port string // set before the first request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case mode.Load() == "port" && strings.Contains(r.URL.Path, "/blobs/"):
			http.Redirect(w, r, "https://example.com:"+internalPort+r.URL.Path, http.StatusTemporaryRedirect)
		case r.Host != "example.com:"+port && r.Host != "127.0.0.1:"+port:
			hit.Add(1)
			w.WriteHeader(http.StatusOK)
		case mode.Load() == "realm" && r.URL.Path == "/v2/" && r.Header.Get("Authorization") == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="https://tokens.example.com:`+port+`/token",service="x"`)
			w.WriteHeader(http.StatusUnauthorized)
		case mode.Load() == "redirect" && strings.Contains(r.URL.Path, "/blobs/"):
			http.Redirect(w, r, "https://blobs.example.com:"+port+r.URL.Path, http.StatusTemporaryRedirect)
		default:
			reg.ServeHTTP(w, r)
		}
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port = srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	push(t, "127.0.0.1:"+port+"/img:1", testImage(t, baseLayer(t)), remote.WithTransport(srv.Client().Transport))
	tlsConf := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	for _, m := range []string{"none", "redirect", "realm", "port"} {
		t.Run(m, func(t *testing.T) {
			mode.Store(m)
			s := openStore(t, Options{})
			_, err := s.Pull(context.Background(), "example.com:"+port+"/img:1", "x", PullOptions{Keychain: authn.NewMultiKeychain(), tls: tlsConf, lookup: rebinding(), dial: redirectPublic})
			if m == "none" && err != nil {
				t.Errorf("got %v, want the pull from the registry's first, public addresses", err)
			} else if m != "none" && (err == nil || !strings.Contains(err.Error(), "inside the operator's network")) {
				t.Errorf("got %v, want the rebound name refused", err)
			}
			t.Logf("got: %v", err)
			if n := hit.Load(); n != 0 {
				t.Errorf("%d requests reached the loopback server under a forbidden name", n)
			}
		})
	}
}
