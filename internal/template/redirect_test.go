package template

import (
	"context"
	"io"
	"log"
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

// TestRedirectGuard checks which registry redirects a pull follows.
func TestRedirectGuard(t *testing.T) {
	tests := []struct {
		from, to string
		want     string // "" to allow
	}{
		{"https://203.0.113.1/v2/", "https://198.51.100.1/blob", ""},
		{"https://203.0.113.1/v2/", "http://198.51.100.1/blob", "from https to http"},
		{"https://203.0.113.1/v2/", "https://127.0.0.1/blob", "loopback, link-local or private"},
		{"https://203.0.113.1/v2/", "https://[::1]:5000/blob", "loopback, link-local or private"},
		{"https://203.0.113.1/v2/", "https://169.254.169.254/latest/meta-data", "loopback, link-local or private"},
		{"https://203.0.113.1/v2/", "https://10.1.2.3/blob", "loopback, link-local or private"},
		{"https://203.0.113.1/v2/", "https://[::ffff:192.168.1.1]/blob", "loopback, link-local or private"},
		{"https://203.0.113.1/v2/", "https://localhost/blob", "loopback, link-local or private"},
		{"http://127.0.0.1:5000/v2/", "http://127.0.0.1:5001/blob", ""},
		{"http://localhost:5000/v2/", "http://10.0.0.1/blob", ""},
	}
	for _, tc := range tests {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		var sent bool
		g := guardedTransport{g: newNetGuard(from.Host, nil), next: roundTripFunc(func(*http.Request) (*http.Response, error) {
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

// rebinding is a resolver standing in for DNS: the registry's name
// (example.com: httptest's certificate covers it and *.example.com) is
// the loopback test server, and every other name is public on its first
// lookup and loopback after it, as a DNS rebinding attacker answers.
func rebinding() func(context.Context, string) ([]netip.Addr, error) {
	var seen sync.Map
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, err := netip.ParseAddr(host); err == nil {
			return []netip.Addr{a}, nil
		}
		if _, again := seen.LoadOrStore(host, true); again || host == "example.com" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
	}
}

// TestPullGuardsRebindingAndRealm pulls from a TLS registry the guard
// takes for a public one (example.com, on loopback) that sends Warden
// to names rebinding to loopback: a blob redirect, and a token realm
// from WWW-Authenticate. Both are refused when dialed, and the loopback
// server behind those names never sees the request.
func TestPullGuardsRebindingAndRealm(t *testing.T) {
	var hit atomic.Int32 // requests that reached a forbidden name
	var mode atomic.Value
	mode.Store("")
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var port string // set before the first request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
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
	for _, m := range []string{"redirect", "realm"} {
		t.Run(m, func(t *testing.T) {
			mode.Store(m)
			s := openStore(t, Options{})
			_, err := s.Pull(context.Background(), "example.com:"+port+"/img:1", "x", PullOptions{Keychain: authn.NewMultiKeychain(), tls: tlsConf, lookup: rebinding()})
			if err == nil || !strings.Contains(err.Error(), "loopback, link-local or private address: refused") {
				t.Errorf("got %v, want the rebound name refused when dialed", err)
			}
			t.Logf("refused: %v", err)
			if n := hit.Load(); n != 0 {
				t.Errorf("%d requests reached the loopback server under a forbidden name", n)
			}
		})
	}
}
