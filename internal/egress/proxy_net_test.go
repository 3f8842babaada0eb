package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// internet puts testPublic on lo, where the proxy may reach it (the tests
// count it as public), and removes it afterwards if it was not there.
func internet(t testing.TB) {
	t.Helper()
	testhost.RequireRoot(t)
	ip := testhost.RequireTool(t, "ip")
	out, err := exec.Command(ip, "-o", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr show: %v: %s", err, out)
	}
	cidr := testPublic.String() + "/32"
	if strings.Contains(string(out), " "+cidr+" ") {
		return
	}
	if out, err := exec.Command(ip, "addr", "add", cidr, "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "addr", "del", cidr, "dev", "lo").Run() })
}

// origin is a test server on testPublic: /hello, /headers (echoes the
// request's header), /redirect, /big?n=N.
func origin(t testing.TB, tls bool) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hello":
			_, _ = io.WriteString(w, "hello from origin")
		case "/headers":
			fmt.Fprintf(w, "%s %s host=%s\n", r.Method, r.RequestURI, r.Host)
			_ = r.Header.Write(w)
		case "/redirect":
			http.Redirect(w, r, "http://127.0.0.1/", http.StatusFound)
		case "/big":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write(bytes.Repeat([]byte("x"), n))
		}
	}))
	ln, err := net.Listen("tcp", net.JoinHostPort(testPublic.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, ln.Addr().(*net.TCPAddr).Port
}

// client sends requests through the attachment, as a sandbox's HTTP
// library would with HTTP_PROXY set; it never follows redirects.
func client(a *Attachment, srv *httptest.Server) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.SocketPath())
		},
	}
	if srv.TLS != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t testing.TB, c *http.Client, u string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp.StatusCode, string(body)
}

var testHosts = map[string][]netip.Addr{"allowed.test": {testPublic}}

func TestAllowedHTTPS(t *testing.T) {
	internet(t)
	srv, port := origin(t, true)
	_, a := attach(t, Config{Hosts: testHosts}, mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, nil))
	status, body := get(t, client(a, srv), fmt.Sprintf("https://allowed.test:%d/hello", port))
	if status != 200 || body != "hello from origin" {
		t.Fatalf("got %d %q, want 200 from the origin", status, body)
	}
	a.Close() // makes the events final
	evs := a.Events()
	if len(evs) != 1 {
		t.Fatalf("events = %+v, want one", evs)
	}
	ev := evs[0]
	want := fmt.Sprintf("CONNECT allowed.test:%d 203.0.113.7 true --allow rule allowed.test:%d", port, port)
	if got := fmt.Sprintf("%s %s:%d %s %v %s", ev.Method, ev.Host, ev.Port, ev.Address, ev.Allowed, ev.Reason); got != want {
		t.Errorf("event = %q, want %q", got, want)
	}
	if ev.BytesUp < 100 || ev.BytesDown < 500 {
		t.Errorf("bytes up/down = %d/%d, want a TLS handshake's worth each way", ev.BytesUp, ev.BytesDown)
	}
}

func TestAllowedHTTP(t *testing.T) {
	internet(t)
	srv, port := origin(t, false)
	_, a := attach(t, Config{Hosts: testHosts}, mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, nil))
	c := client(a, srv)
	base := fmt.Sprintf("http://allowed.test:%d", port)
	if status, body := get(t, c, base+"/hello"); status != 200 || body != "hello from origin" {
		t.Fatalf("got %d %q, want 200 from the origin", status, body)
	}
	// Hop-by-hop and Proxy-* headers stop at the proxy; the request
	// arrives in origin form with the checked host.
	_, body := get(t, c, base+"/headers?q=1", "Proxy-Authorization", "Basic c2VjcmV0", "X-Hop", "1", "Connection", "X-Hop", "X-Kept", "yes")
	if !strings.HasPrefix(body, fmt.Sprintf("GET /headers?q=1 host=allowed.test:%d\n", port)) || !strings.Contains(body, "X-Kept: yes") ||
		strings.Contains(body, "Proxy-") || strings.Contains(body, "X-Hop") {
		t.Errorf("origin saw:\n%s", body)
	}
	// Redirects are the client's business.
	if status, _ := get(t, c, base+"/redirect"); status != http.StatusFound {
		t.Errorf("redirect: status %d, want 302 passed back", status)
	}
	a.Close()
	evs := a.Events()
	if len(evs) != 3 || evs[0].Method != "GET" || !evs[0].Allowed || evs[0].Address != "203.0.113.7" || evs[0].BytesDown < int64(len("hello from origin")) || evs[0].BytesUp == 0 {
		t.Errorf("events = %+v", evs)
	}
}

func TestLiteralAllowedOnlyWhenNamed(t *testing.T) {
	internet(t)
	srv, port := origin(t, false)
	_, a := attach(t, Config{}, mustPolicy(t, []string{"203.0.113.7:" + strconv.Itoa(port)}, nil))
	c := client(a, srv)
	for _, host := range []string{"203.0.113.7", "[::ffff:203.0.113.7]", "0xcb.0.0x71.7"} {
		if status, body := get(t, c, fmt.Sprintf("http://%s:%d/hello", host, port)); status != 200 {
			t.Errorf("%s: %d %q, want 200", host, status, body)
		}
	}
	if status, body := get(t, c, fmt.Sprintf("http://allowed.test:%d/hello", port)); status != 403 {
		t.Errorf("name: %d %q, want 403", status, body)
	}
}

func TestRebinding(t *testing.T) {
	internet(t)
	_, port := origin(t, false)
	tr := newTrap(t, "127.0.0.1:"+strconv.Itoa(port))
	tr6 := newTrap(t, "[::1]:"+strconv.Itoa(port))
	res := fakeResolver{
		"rebind.test":       addrs("127.0.0.1", "203.0.113.7"),
		"public-first.test": addrs("203.0.113.7", "127.0.0.1"),
		"local.test":        addrs("127.0.0.1"),
		"hidden.test":       addrs("::ffff:127.0.0.1", "::1", "169.254.169.254", "10.0.0.1", "::ffff:10.0.0.2"),
	}
	p := strconv.Itoa(port)
	_, a := attach(t, Config{Resolver: res}, mustPolicy(t, []string{"*.test:" + p}, nil))
	tests := []struct {
		host, wantStatus, wantBody string
	}{
		{"rebind.test", "200", ""},
		{"public-first.test", "200", ""},
		{"local.test", "403", "warden egress: denied local.test:" + p + ": local.test resolves only to 127.0.0.1 (loopback), which the sandbox may never reach\n"},
		{"hidden.test", "403", "hidden.test resolves only to 127.0.0.1 (loopback), ::1 (loopback), 169.254.169.254 (link-local), 10.0.0.1 (private), and 1 more, which"},
	}
	for _, tt := range tests {
		resp, c, _ := send(t, a, "CONNECT "+tt.host+":"+p+" HTTP/1.1\r\n\r\n")
		body := ""
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
		}
		c.Close()
		if strconv.Itoa(resp.StatusCode) != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
			t.Errorf("CONNECT %s: %d %q, want %s %q", tt.host, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
		}
	}
	// The proxy's own listener is no TCP port; loopback is never dialled.
	if status, body := refusal(t, a, "CONNECT 127.0.0.1:"+p+" HTTP/1.1\r\n\r\n"); status != 403 || !strings.Contains(body, "(loopback)") {
		t.Errorf("CONNECT 127.0.0.1: %d %q, want 403 loopback", status, body)
	}
	a.Close()
	if n, n6 := tr.close(), tr6.close(); n+n6 != 0 {
		t.Errorf("%d connections reached 127.0.0.1 and %d reached ::1, want none", n, n6)
	}
	for _, ev := range a.Events()[:2] {
		if ev.Address != "203.0.113.7" || !ev.Allowed {
			t.Errorf("event %+v: want allowed to 203.0.113.7", ev)
		}
	}
}

func TestMaxConns(t *testing.T) {
	internet(t)
	_, port := origin(t, false)
	pol := mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, nil)
	pol.MaxConns = 2
	_, a := attach(t, Config{Hosts: testHosts}, pol)
	connect := "CONNECT allowed.test:" + strconv.Itoa(port) + " HTTP/1.1\r\n\r\n"
	var open []net.Conn
	for range 2 {
		resp, c, _ := send(t, a, connect)
		if resp.StatusCode != 200 {
			t.Fatalf("tunnel: %d, want 200", resp.StatusCode)
		}
		open = append(open, c)
	}
	if status, body := refusal(t, a, connect); status != 429 || !strings.Contains(body, "too many connections: at most 2 at once") {
		t.Errorf("third tunnel: %d %q, want 429", status, body)
	}
	// Closing one frees its slot once the proxy sees it end.
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, c, _ := send(t, a, connect)
		c.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing a tunnel: still %d", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMaxBytes(t *testing.T) {
	internet(t)
	srv, port := origin(t, false)
	pol := mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, nil)
	pol.MaxBytes = 1 << 20
	_, a := attach(t, Config{Hosts: testHosts}, pol)
	c := client(a, srv)
	u := fmt.Sprintf("http://allowed.test:%d/big?n=%d", port, 4<<20)
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n >= 1<<20 {
		t.Errorf("download past the limit: %d bytes, error %v; want it cut before 1 MiB", n, err)
	}
	if status, body := get(t, c, u); status != 403 || !strings.Contains(body, "byte limit reached") {
		t.Errorf("after the limit: %d %q, want 403 byte limit", status, body)
	}
	a.Close()
	evs := a.Events()
	if len(evs) != 2 || !strings.HasSuffix(evs[0].Reason, "; closed at the byte limit") || evs[0].BytesUp+evs[0].BytesDown != 1<<20 {
		t.Errorf("events = %+v, want the first cut at exactly 1 MiB", evs)
	}
}

func TestSetPolicy(t *testing.T) {
	internet(t)
	srv, port := origin(t, false)
	_, a := attach(t, Config{Hosts: testHosts}, mustPolicy(t, []string{"other.test"}, nil))
	c := client(a, srv)
	u := fmt.Sprintf("http://allowed.test:%d/hello", port)
	if status, _ := get(t, c, u); status != 403 {
		t.Fatalf("before: %d, want 403", status)
	}
	a.SetPolicy(mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, nil))
	if status, _ := get(t, c, u); status != 200 {
		t.Fatalf("after allowing: %d, want 200", status)
	}
	a.SetPolicy(mustPolicy(t, []string{"allowed.test:" + strconv.Itoa(port)}, []string{"allowed.test"}))
	if status, body := get(t, c, u); status != 403 || !strings.Contains(body, "--deny rule allowed.test matches") {
		t.Fatalf("after denying: %d %q, want 403", status, body)
	}
}

func TestUpstreamFailures(t *testing.T) {
	internet(t)
	_, port := origin(t, false)
	closed := newTrap(t, net.JoinHostPort(testPublic.String(), "0"))
	cport := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.close()
	_, a := attach(t, Config{Hosts: testHosts}, mustPolicy(t, []string{"allowed.test:" + cport, "allowed.test:" + strconv.Itoa(port)}, nil))
	if status, body := refusal(t, a, "CONNECT allowed.test:"+cport+" HTTP/1.1\r\n\r\n"); status != 502 ||
		body != "warden egress: failed allowed.test:"+cport+": cannot connect to 203.0.113.7: connection refused\n" {
		t.Errorf("closed port: %d %q, want 502", status, body)
	}
	// A malformed request leaves the proxy serving.
	refusal(t, a, "\x00\x01\x02\r\n\r\n")
	if resp, c, _ := send(t, a, "CONNECT allowed.test:"+strconv.Itoa(port)+" HTTP/1.1\r\n\r\n"); resp.StatusCode != 200 {
		t.Errorf("after a malformed request: %d, want 200", resp.StatusCode)
	} else {
		c.Close()
	}
}
