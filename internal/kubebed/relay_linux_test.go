package kubebed

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// echoUpper is a program taking a listener as stdin: it logs the
// listener's family and "ready", then answers one connection with what
// it read, upper-cased, once the peer closed its writing side.
const echoUpper = `import socket, sys
l = socket.socket(fileno=0)
print("family", l.family.name, flush=True)
print("ready", flush=True)
c, _ = l.accept()
d = b""
while True:
    b = c.recv(4096)
    if not b:
        break
    d += b
c.sendall(d.upper())
c.close()
`

// TestStartCommandRelays: a PodProcess taking its listener as stdin gets
// a unix listener, never the TCP one, and a TCP connection to the Pod's
// address reaches it through the kubelet's relay both ways, each
// direction closed in turn; once the program ended the address refuses
// connections. Without Ready or a port it is refused.
func TestStartCommandRelays(t *testing.T) {
	python := testhost.RequireTool(t, "python3")
	k := &Kubelet{dir: t.TempDir()}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "relayed", Namespace: "default"}}
	ap := freeAddr(t)
	prog := PodProcess{Path: python, Args: []string{"-c", echoUpper}, ListenerStdin: true, Ready: "ready"}
	for _, tt := range []struct {
		name string
		ap   netip.AddrPort
		c    PodProcess
		want string
	}{
		{"no Ready", ap, PodProcess{Path: python, ListenerStdin: true}, "needs Ready"},
		{"no port", netip.AddrPortFrom(ap.Addr(), 0), prog, "declares no container port"},
	} {
		if _, err := k.startCommand(pod, tt.ap, tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: startCommand = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	proc, err := k.startCommand(pod, ap, prog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.stop(); err != nil {
			t.Error(err)
		}
	})
	testhost.WaitFor(t, "the program's ready line", func() bool { return strings.Contains(proc.tail(), "ready") || proc.exited() })
	if !strings.Contains(proc.tail(), "family AF_UNIX") {
		t.Fatalf("the program's log: %q, want its stdin's family AF_UNIX", proc.tail())
	}
	c, err := net.DialTimeout("tcp", ap.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("relayed")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "RELAYED" {
		t.Errorf("through the relay: got %q, %v; want %q then EOF", got, err, "RELAYED")
	}
	testhost.WaitFor(t, "the program's end", proc.exited)
	if c, err := net.DialTimeout("tcp", ap.String(), 10*time.Second); err == nil {
		c.Close()
		t.Errorf("a connection to %s after the program ended: accepted, want refused (the relay closed)", ap)
	}
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// boxStub stands in for a Pod's boxed program on the relay's unix
// listener f: with answer it writes "x" on each connection and closes
// it at once (as the init closes one that does not prove its key);
// without, it never accepts.
func boxStub(t *testing.T, f *os.File, answer bool) {
	t.Helper()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if !answer {
		return
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// a write that fails only means the client went first
			_, _ = c.Write([]byte("x"))
			c.Close()
		}
	}()
}

// readOne reads c's first byte within 10 s: "" at EOF.
func readOne(t *testing.T, c net.Conn) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	n, err := c.Read(b[:])
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("reading from the relay: %v", err)
	}
	return string(b[:n])
}

// dialRelay opens n connections to ap.
func dialRelay(t *testing.T, ap netip.AddrPort, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", ap.String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// TestRelayBound: with maxRelayed connections relayed to a program that
// never accepts, one more is closed at once; with a program that closes
// every connection (an init refusing silent clients), maxRelayed
// clients that stay open and silent free their slots within the
// relay's linger, and a later connection is relayed again (they used to
// keep them until the client closed).
func TestRelayBound(t *testing.T) {
	for _, answer := range []bool{false, true} {
		ap := freeAddr(t)
		r, f, err := newRelay(ap)
		if err != nil {
			t.Fatal(err)
		}
		boxStub(t, f, answer)
		r.linger = 100 * time.Millisecond
		r.serve()
		t.Cleanup(r.close)
		cs := dialRelay(t, ap, maxRelayed)
		if !answer {
			testhost.WaitFor(t, "the relay's slots taken", func() bool { return len(r.slots) == maxRelayed })
			if got := readOne(t, dialRelay(t, ap, 1)[0]); got != "" {
				t.Errorf("connection %d to a program that never accepts: read %q, want EOF at once", maxRelayed+1, got)
			}
			continue
		}
		for i, c := range cs {
			if got := readOne(t, c); got != "x" {
				t.Fatalf("relayed connection %d: read %q, want %q", i, got, "x")
			}
		}
		relayed := false
		for try := 0; try < 100 && !relayed; try++ {
			relayed = readOne(t, dialRelay(t, ap, 1)[0]) == "x"
			if !relayed {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !relayed {
			t.Errorf("with %d silent clients the program has closed on, a new connection was never relayed: their slots stayed taken", maxRelayed)
		}
	}
}
