package kubebed

import (
	"io"
	"net"
	"net/netip"
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
