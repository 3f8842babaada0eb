package podinit

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// testServer runs the accept loop on loopback with a serve that answers
// "served" and hangs up, and returns its address and log.
func testServer(t *testing.T, handshake time.Duration) (string, *testhost.SyncBuffer) {
	t.Helper()
	// Not 127.0.0.1, the source of the tests' connections: one from the
	// listener's own address is the Pod's own (fromItself).
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testhost.SyncBuffer{}
	l := log.New(logs, "", 0)
	s := &server{
		ln: ln, log: l, refusals: refusalLog{log: l, now: time.Now}, handshake: handshake,
		serve: func(c net.Conn) error {
			defer c.Close()
			_, err := c.Write([]byte("served"))
			return err
		},
	}
	done := make(chan error, 1)
	go func() { done <- s.loop() }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("loop ended with %v, want the listener's close", err)
		}
	})
	return ln.Addr().String(), logs
}

// dialPresent connects to addr and presents key; a served connection
// reads "served".
func dialPresent(t *testing.T, addr string, key ed25519.PrivateKey) (Adoption, string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, err := Present(c, key, c.RemoteAddr().String())
	if err != nil {
		return 0, "", err
	}
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	return a, string(buf[:n]), nil
}

func TestServeAdoptsOnce(t *testing.T) {
	addr, logs := testServer(t, HandshakeTimeout)
	mine, theirs := testKey(t, "pod-1"), testKey(t, "pod-2")
	steps := []struct {
		name string
		key  ed25519.PrivateKey
		want Adoption
		err  error
	}{
		{"first key adopts", mine, Adopted, nil},
		{"a second adopter is refused", theirs, 0, ErrTaken},
		{"the owner returns", mine, Returned, nil},
	}
	for _, s := range steps {
		got, served, err := dialPresent(t, addr, s.key)
		if got != s.want || !errors.Is(err, s.err) {
			t.Errorf("%s: Present = %v, %v; want %v, %v", s.name, got, err, s.want, s.err)
		}
		if err == nil && served != "served" {
			t.Errorf("%s: the connection read %q, want it served", s.name, served)
		}
	}
	testhost.WaitFor(t, "the refusal's log line", func() bool { return strings.Contains(logs.String(), "refused") })
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.HasPrefix(line, "refused") && !strings.HasSuffix(line, ErrTaken.Error()) {
			t.Errorf("log line %q, want the refusal to name the cause %q", line, ErrTaken)
		}
	}
}

func TestServeCutsBadPeers(t *testing.T) {
	// A peer that sends nothing is cut at the handshake's deadline, and
	// one that sends garbage at once; the next honest peer is served.
	addr, logs := testServer(t, 200*time.Millisecond)
	peers := []struct {
		name string
		send []byte
		want string
	}{
		{"silent", nil, os.ErrDeadlineExceeded.Error()},
		{"garbage", bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 1<<12), ErrBadProof.Error()},
	}
	for _, p := range peers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if len(p.send) > 0 {
			// the init reads only the proof's bytes and may hang up mid-write
			_, _ = c.Write(p.send)
		}
		// The init closes the connection: the read ends.
		rest, _ := readAll(c)
		c.Close()
		if len(rest) > helloSize+1 {
			t.Errorf("%s: the init sent %d bytes, want at most its hello and an answer (%d)", p.name, len(rest), helloSize+1)
		}
		testhost.WaitFor(t, p.name+"'s refusal", func() bool { return strings.Contains(logs.String(), p.want) })
	}
	if a, served, err := dialPresent(t, addr, testKey(t, "pod-1")); err != nil || a != Adopted || served != "served" {
		t.Errorf("after the bad peers: Present = %v, %q, %v; want adopted and served", a, served, err)
	}
}

func TestServeDropsItsOwnConnections(t *testing.T) {
	// A connection from the listener's own address is dropped before
	// any handshake, and the next honest peer is served.
	addr, logs := testServer(t, HandshakeTimeout)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	local := &net.TCPAddr{IP: net.ParseIP(host)}
	for range 3 {
		c, err := (&net.Dialer{LocalAddr: local}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(c); len(got) != 0 {
			t.Errorf("the init sent %q to a connection from itself, want nothing", got)
		}
		c.Close()
	}
	if a, served, err := dialPresent(t, addr, testKey(t, "pod-1")); err != nil || a != Adopted || served != "served" {
		t.Errorf("after the Pod's own connections: Present = %v, %q, %v; want adopted and served", a, served, err)
	}
	if n := strings.Count(logs.String(), "a connection from the Pod itself"); n != 3 {
		t.Errorf("log has %d refusals of the Pod's own connections, want 3:\n%s", n, logs)
	}
}

func TestRefusalLog(t *testing.T) {
	// A burst of refusals logs refusalBurst lines, then one line with
	// the number left out once the window has passed.
	var buf bytes.Buffer
	t0 := time.Unix(1000, 0)
	now := t0
	r := refusalLog{log: log.New(&buf, "", 0), now: func() time.Time { return now }}
	for i := range refusalBurst + 15 {
		r.printf("refused %d", i)
	}
	now = t0.Add(refusalWindow)
	r.printf("refused late")
	r.flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := refusalBurst + 2
	if len(lines) != want {
		t.Fatalf("%d lines logged, want %d:\n%s", len(lines), want, buf.String())
	}
	if got, want := lines[refusalBurst], "15 more refusals not logged (at most 10 a second)"; got != want {
		t.Errorf("the summary line = %q, want %q", got, want)
	}
	if got, want := lines[refusalBurst+1], "refused late"; got != want {
		t.Errorf("the line after the window = %q, want %q", got, want)
	}
}

func TestItself(t *testing.T) {
	ip := net.ParseIP
	pod := []net.IP{ip("127.0.0.1"), ip("::1"), ip("10.1.1.1"), ip("10.1.1.2"), ip("fd01::1")}
	for _, tc := range []struct {
		name                  string
		listen, local, remote string
		want                  bool
	}{
		{"a router", "::", "10.1.1.1", "10.0.1.9", false},
		{"a router to the Pod's second address", "::", "10.1.1.2", "10.0.1.9", false},
		{"a router over IPv6", "::", "fd01::1", "fd02::9", false},
		{"the Pod to its own address", "::", "10.1.1.1", "10.1.1.1", true},
		{"the Pod to 127.0.0.1", "::", "127.0.0.1", "127.0.0.1", true},
		{"the Pod to another loopback address", "0.0.0.0", "127.0.0.2", "127.0.0.1", true},
		{"the Pod over IPv6 loopback", "::", "::1", "::1", true},
		{"the Pod from its address to 127.0.0.1", "0.0.0.0", "127.0.0.1", "10.1.1.1", true},
		{"the Pod from its address to ::1", "::", "::1", "fd01::1", true},
		{"the Pod between two of its addresses", "::", "10.1.1.2", "10.1.1.1", true},
		{"the Pod from loopback to its address", "::", "10.1.1.1", "127.0.0.1", true},
		{"a test's router on loopback", "127.0.0.2", "127.0.0.2", "127.0.0.1", false},
		{"a test's Pod to its own loopback address", "127.0.0.2", "127.0.0.2", "127.0.0.2", true},
	} {
		if got := itself(ip(tc.listen), ip(tc.local), ip(tc.remote), pod); got != tc.want {
			t.Errorf("%s: itself(%s, %s, %s) = %v, want %v", tc.name, tc.listen, tc.local, tc.remote, got, tc.want)
		}
	}
}

// readAll reads c until its end or an error, at most 64 KiB.
func readAll(c net.Conn) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < 64<<10 {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		want podArgs
		err  string
	}{
		{nil, podArgs{addr: ":7070", fd: -1}, ""},
		{[]string{"--listen", "127.0.0.2:9"}, podArgs{addr: "127.0.0.2:9", fd: -1}, ""},
		{[]string{"--listen-fd", "0", "--addr", "127.0.0.9:7070", "--in-warden-sandbox"}, podArgs{addr: "127.0.0.9:7070", fd: 0, inWarden: true}, ""},
		{[]string{"--in-warden-sandbox", "--listen-fd", "3", "--addr", "[::1]:80"}, podArgs{addr: "[::1]:80", fd: 3, inWarden: true}, ""},
		{[]string{"--listen-fd", "0"}, podArgs{}, "--listen-fd needs --addr"},
		{[]string{"--listen-fd", "0", "--addr", "pod.local:7070"}, podArgs{}, "is not IP:PORT"},
		{[]string{"--listen-fd", "0", "--addr", "127.0.0.9"}, podArgs{}, "is not IP:PORT"},
		{[]string{"--addr", "127.0.0.9:7070", "--listen-fd", "0"}, podArgs{}, "usage:"},
		{[]string{"--listen", "127.0.0.2:9", "--addr", "127.0.0.9:7070"}, podArgs{}, "usage:"},
		{[]string{"--listen-fd", "0", "--addr", "127.0.0.9:1", "--addr", "127.0.0.9:2"}, podArgs{}, "usage:"},
		{[]string{"--listen-fd", "-1"}, podArgs{}, "is not a descriptor number"},
		{[]string{"--listen-fd", "x"}, podArgs{}, "is not a descriptor number"},
		{[]string{"--listen", "127.0.0.2:9", "--listen-fd", "3"}, podArgs{}, "usage:"},
		{[]string{"--in-warden-sandbox", "--in-warden-sandbox"}, podArgs{}, "usage:"},
		{[]string{"--listen"}, podArgs{}, "usage:"},
		{[]string{"7070"}, podArgs{}, "usage:"},
	}
	for _, tt := range tests {
		got, err := parseArgs(tt.args)
		if got != tt.want || !errorSays(err, tt.err) {
			t.Errorf("parseArgs(%q) = %+v, %v; want %+v, error containing %q", tt.args, got, err, tt.want, tt.err)
		}
	}
	if !IsPod([]string{"/warden-init", "pod"}) || IsPod([]string{"warden-init"}) || IsPod([]string{"/.warden/warden-init", "stdin"}) {
		t.Error("IsPod: want true for \"warden-init pod\" only")
	}
}

// errorSays is whether err is nil for an empty want, or says want.
func errorSays(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

// TestServeRelayed: on a unix listener (a relay's), the proof must sign
// the Pod's address given to the server, which the connection does not
// carry; a proof over any other address is refused, and the log names
// the connection as relayed.
func TestServeRelayed(t *testing.T) {
	const podAddr = "127.0.0.9:7070"
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testhost.SyncBuffer{}
	l := log.New(logs, "", 0)
	s := &server{
		ln: ln, addr: podAddr, log: l, refusals: refusalLog{log: l, now: time.Now}, handshake: HandshakeTimeout,
		serve: func(c net.Conn) error {
			defer c.Close()
			// the client closes once Present returns, perhaps before this
			// write: a broken pipe here is the race, not the server's fault
			_, _ = c.Write([]byte("served"))
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- s.loop() }()
	defer func() {
		ln.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("loop ended with %v, want the listener's close", err)
		}
	}()
	key := testKey(t, "pod-1")
	for _, tt := range []struct {
		signed string
		want   error
	}{
		{"127.0.0.10:7070", ErrBadProof},
		{podAddr, nil},
	} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		_, err = Present(c, key, tt.signed)
		c.Close()
		if !errors.Is(err, tt.want) {
			t.Errorf("a proof over %s: Present = %v, want %v", tt.signed, err, tt.want)
		}
	}
	testhost.WaitFor(t, "the served line", func() bool { return strings.Contains(logs.String(), "serving a relayed connection") })
}
