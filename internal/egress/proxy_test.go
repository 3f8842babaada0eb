package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeResolver answers from a table, and refuses every other name.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if as, ok := r[host]; ok {
		return as, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// attach starts a proxy with a short socket directory (sun_path is
// short) and attaches one sandbox, unpaced; both close with the test.
func attach(t testing.TB, cfg Config, pol Policy) (*Proxy, *Attachment) {
	t.Helper()
	return attachPaced(t, cfg, pol, Pace{}, nil)
}

// attachPaced is attach with a connection pace (see Attach), and wait, if
// not nil, in place of the wait for a paced connection's turn.
func attachPaced(t testing.TB, cfg Config, pol Policy, pace Pace, wait func(context.Context, time.Duration) error) (*Proxy, *Attachment) {
	t.Helper()
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "eg")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		cfg.Dir = filepath.Join(dir, "egress")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = fakeResolver{}
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if wait != nil {
		p.paceWait = wait
	}
	a, err := p.Attach("sbx1", pol, pace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, a
}

// send writes a raw request to a new connection and reads the answer's
// header; for a 200 to CONNECT the connection stays open as the tunnel.
func send(t testing.TB, a *Attachment, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", a.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: reading the answer: %v", firstLine(raw), err)
	}
	return resp, c, br
}

// refusal sends raw and returns the status and body of the answer.
func refusal(t testing.TB, a *Attachment, raw string) (int, string) {
	t.Helper()
	resp, c, _ := send(t, a, raw)
	defer c.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%q: reading the body: %v", firstLine(raw), err)
	}
	return resp.StatusCode, string(body)
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }

func TestRefusals(t *testing.T) {
	_, a := attach(t, Config{Hosts: map[string][]netip.Addr{"allowed.test": {testPublic}}},
		mustPolicy(t, []string{"allowed.test", "*.example.com"}, []string{"bad.example.com"}))
	long := strings.Repeat("a", 70<<10)
	tests := []struct {
		name, raw  string
		wantStatus int
		wantBody   string
	}{
		{"not on the list", "CONNECT other.test:443 HTTP/1.1\r\n\r\n", 403,
			"warden egress: denied other.test:443: no --allow rule matches (allowed: allowed.test, *.example.com)\n"},
		{"plain http not on the list", "GET http://other.test/x HTTP/1.1\r\nHost: other.test\r\n\r\n", 403,
			"warden egress: denied other.test:80: no --allow rule matches"},
		{"deny beats allow", "CONNECT bad.example.com:443 HTTP/1.1\r\n\r\n", 403,
			"warden egress: denied bad.example.com:443: --deny rule bad.example.com matches\n"},
		{"wrong port", "CONNECT allowed.test:22 HTTP/1.1\r\n\r\n", 403, "no --allow rule matches"},
		{"127.1", "CONNECT 127.1:443 HTTP/1.1\r\n\r\n", 403, "127.1 means 127.0.0.1 (loopback)"},
		{"hex", "CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n", 403, "0x7f000001 means 127.0.0.1 (loopback)"},
		{"octal", "CONNECT 0177.0.0.1:80 HTTP/1.1\r\n\r\n", 403, "0177.0.0.1 means 127.0.0.1 (loopback)"},
		{"mapped", "CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n", 403, "means 127.0.0.1 (loopback)"},
		{"ipv6 loopback", "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 403, "::1 (loopback) is an address the sandbox may never reach"},
		{"metadata in decimal", "GET http://2852039166/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 403,
			"denied 2852039166:80: 2852039166 means 169.254.169.254 (link-local)"},
		{"metadata", "GET http://169.254.169.254/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, "169.254.169.254 (link-local)"},
		{"private", "CONNECT 10.1.2.3:443 HTTP/1.1\r\n\r\n", 403, "(private)"},
		{"cgnat", "CONNECT 100.100.100.200:80 HTTP/1.1\r\n\r\n", 403, "(cgnat)"},
		{"unique local", "CONNECT [fd00:ec2::254]:80 HTTP/1.1\r\n\r\n", 403, "(unique-local)"},
		{"unspecified", "CONNECT 0:443 HTTP/1.1\r\n\r\n", 403, "0 means 0.0.0.0 (unspecified)"},
		{"broadcast", "CONNECT 255.255.255.255:443 HTTP/1.1\r\n\r\n", 403, "(broadcast)"},
		{"multicast", "CONNECT 224.0.0.1:443 HTTP/1.1\r\n\r\n", 403, "(multicast)"},
		{"nat64", "CONNECT [64:ff9b::a00:1]:443 HTTP/1.1\r\n\r\n", 403, "(private)"},
		{"invalid literal", "CONNECT 127.0.0.256:443 HTTP/1.1\r\n\r\n", 403, "127.0.0.256 is not a valid IP address"},
		{"public literal not named", "CONNECT 8.8.8.8:443 HTTP/1.1\r\n\r\n", 403, "no --allow rule matches"},
		{"literal of an allowed name", "CONNECT 203.0.113.7:443 HTTP/1.1\r\n\r\n", 403, "no --allow rule matches"},
		{"origin form", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400,
			"warden egress: bad request: this is a proxy: ask for an absolute http://host/path URL, or CONNECT host:port\n"},
		{"https url", "GET https://allowed.test/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "https:// goes through CONNECT host:443"},
		{"other scheme", "GET ftp://allowed.test/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, `scheme "ftp" is not supported`},
		{"unix scheme", "GET unix:///run/warden/egress/x HTTP/1.1\r\nHost: x\r\n\r\n", 400, `scheme "unix" is not supported`},
		{"connect without port", "CONNECT allowed.test HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port"},
		{"connect port zero", "CONNECT allowed.test:0 HTTP/1.1\r\n\r\n", 400, `port "0" is not in 1..65535`},
		{"connect big port", "CONNECT allowed.test:70000 HTTP/1.1\r\n\r\n", 400, "not in 1..65535"},
		{"bad host name", "CONNECT a_b!c:443 HTTP/1.1\r\n\r\n", 400, "bad request for a_b!c:443: not a valid host name"},
		{"the proxy's own socket", "CONNECT " + a.SocketPath() + " HTTP/1.1\r\n\r\n", 400, "CONNECT needs host:port"},
		{"the proxy's own socket with a port", "CONNECT " + a.SocketPath() + ":80 HTTP/1.1\r\n\r\n", 400, "not a valid host name"},
		{"garbage", "hello\r\n\r\n", 400, "warden egress: bad request: malformed request"},
		{"huge header", "GET http://allowed.test/ HTTP/1.1\r\nX-Big: " + long + "\r\n\r\n", 431, "request header larger than 64 KiB"},
		{"unresolvable", "CONNECT nx.example.com:443 HTTP/1.1\r\n\r\n", 502, "warden egress: failed nx.example.com:443: cannot resolve nx.example.com: no such host\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := refusal(t, a, tt.raw)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) || strings.Count(body, "\n") != 1 {
				t.Errorf("%q: got %d %q, want %d with one line containing %q", firstLine(tt.raw), status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	// Every request above was answered and recorded; the proxy still serves.
	if status, _ := refusal(t, a, "CONNECT other.test:443 HTTP/1.1\r\n\r\n"); status != 403 {
		t.Errorf("after the refusals: status %d, want 403", status)
	}
	events := a.Events()
	if len(events) != len(tests)+1 {
		t.Fatalf("%d events, want %d", len(events), len(tests)+1)
	}
	for _, ev := range events {
		if ev.Allowed || ev.Reason == "" || strings.Contains(ev.Reason, "\n") {
			t.Errorf("event %+v: want a denial with a one-line reason", ev)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
			t.Errorf("event time %q: %v", ev.Time, err)
		}
	}
	first := events[0]
	if first.Method != "CONNECT" || first.Host != "other.test" || first.Port != 443 || first.Address != "" {
		t.Errorf("first event = %+v, want CONNECT other.test:443 without an address", first)
	}
	if ev := events[8]; ev.Host != "::1" || ev.Address != "::1" || ev.Port != 443 {
		t.Errorf("literal event = %+v, want host and address ::1", ev)
	}
}

func TestDialCheckedRefusesDeniedClasses(t *testing.T) {
	trap := newTrap(t, "127.0.0.1:0")
	for _, ap := range []string{trap.Addr().String(), "[::ffff:" + strings.Replace(trap.Addr().String(), ":", "]:", 1)} {
		if _, err := dialChecked(context.Background(), netip.MustParseAddrPort(ap)); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("dialChecked(%s) error = %v, want a loopback refusal", ap, err)
		}
	}
	if n := trap.close(); n != 0 {
		t.Errorf("%d connections reached the loopback listener", n)
	}
}

// trap is a listener that counts every connection that reaches it.
type trap struct {
	net.Listener
	done chan int
}

func newTrap(t testing.TB, addr string) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{Listener: ln, done: make(chan int, 1)}
	go func() {
		n := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				tr.done <- n
				return
			}
			n++
			c.Close()
		}
	}()
	return tr
}

// close stops the trap and says how many connections it caught.
func (tr *trap) close() int {
	tr.Listener.Close()
	return <-tr.done
}

func TestAttachAndClose(t *testing.T) {
	p, a := attach(t, Config{}, Policy{})
	path := a.SocketPath()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket %s: %v, %v; want a 0666 socket", path, fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("socket directory: %v, %v; want 0711", fi.Mode(), err)
	}
	if fi, err := os.Stat(p.cfg.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("proxy directory: %v, %v; want 0700", fi.Mode(), err)
	}
	if _, err := p.Attach("sbx1", Policy{}, Pace{}); err == nil {
		t.Error("attaching sbx1 twice succeeded")
	}
	if _, err := p.Attach("../x", Policy{}, Pace{}); err == nil {
		t.Error(`attaching "../x" succeeded`)
	}
	// An idle client is closed with the attachment.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// EOF when the proxy had accepted it, a reset when it was still in
	// the listener's backlog; never a hang.
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("idle client after Close: %v, want it closed", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory after Close: %v, want it gone", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	b, err := p.Attach("sbx1", Policy{}, Pace{})
	if err != nil {
		t.Fatalf("attaching again after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Proxy.Close: %v, want it gone", err)
	}
	if _, err := p.Attach("sbx2", Policy{}, Pace{}); err == nil {
		t.Error("Attach after Close succeeded")
	}
}
