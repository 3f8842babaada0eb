package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// probeArg, as the test binary's only argument, makes it the program of
// TestListenerStdinHostile's box: listenerProbe.
const probeArg = "listener-probe"

// probeTargetEnv names, for listenerProbe, the abstract unix address and
// the TCP address on loopback of the host's network namespace that it
// tries to reach through the handed-in sockets.
const probeTargetEnv = "WARDEN_PROBE_TARGETS"

// isListenerProbe says argv runs listenerProbe.
func isListenerProbe(argv []string) bool { return len(argv) == 2 && argv[1] == probeArg }

// listenerProbe runs in the box with a listening unix stream socket of
// the host's network namespace as fd 0: it accepts one connection and
// tries, on the listener and the accepted socket, what an inet socket
// would allow (disconnect with AF_UNSPEC, connect to a host address,
// bind), then the peer's pidfd (peerPidfd), then reaches the host's abstract address from a socket of its
// own, and lists its network interfaces. The AF_UNSPEC and host TCP
// rows fail on any unix socket by their family (EINVAL), whatever its
// state; the host abstract rows are the ones that test the listening
// and connected states. It prints one line each; a
// line ending "succeeded" is a weakness. Every wait is bounded.
func listenerProbe() {
	targets := strings.Fields(os.Getenv(probeTargetEnv))
	if len(targets) != 2 {
		fmt.Println("usage: " + probeTargetEnv + "='@abstract 127.0.0.1:port'")
		os.Exit(2)
	}
	abstract := &unix.SockaddrUnix{Name: targets[0]}
	inet, err := inetSockaddr(targets[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	unspec := &unix.RawSockaddrAny{}
	report("listener: connect(AF_UNSPEC)", connectRaw(0, unspec))
	report("listener: connect(host abstract)", unix.Connect(0, abstract))
	report("listener: connect(host TCP)", unix.Connect(0, inet))
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 30_000); n != 1 || err != nil {
		fmt.Printf("accept: no connection within 30 s (%v)\n", err)
		os.Exit(2)
	}
	c, _, err := unix.Accept4(0, unix.SOCK_CLOEXEC)
	if err != nil {
		fmt.Printf("accept: %v\n", err)
		os.Exit(2)
	}
	report("accepted: connect(AF_UNSPEC)", connectRaw(c, unspec))
	report("accepted: connect(host abstract)", unix.Connect(c, abstract))
	report("accepted: connect(host TCP)", unix.Connect(c, inet))
	report("accepted: bind(abstract)", unix.Bind(c, &unix.SockaddrUnix{Name: "@warden-probe-squat"}))
	report("accepted: sendto(host abstract)", unix.Sendto(c, []byte("x"), 0, abstract))
	peerPidfd(c)
	report("own socket: connect(host abstract)", ownConnect(abstract))
	report("listener: shutdown, then connect(host abstract)", shutdownConnect(abstract))
	fmt.Println(interfaces())
	os.Exit(0)
}

// pidfdGetNetNamespace is PIDFD_GET_NET_NAMESPACE, _IO(0xFF, 4), the
// pidfd ioctl that returns a descriptor of the process's network
// namespace (Linux 6.11; x/sys/unix has no name for it).
const pidfdGetNetNamespace = 0xff04

// unavailablePeerPidfd is the line peerPidfd prints where the kernel
// has no SO_PEERPIDFD (before 6.5): its rows cannot run there.
const unavailablePeerPidfd = "accepted: SO_PEERPIDFD unavailable"

// peerPidfd takes a pidfd of the accepted connection's peer (on the
// host, a root process: the relay, or here the test) with SO_PEERPIDFD,
// which the kernel gives any peer, and tries to reach the host with
// it: its network namespace by the pidfd ioctl, a descriptor of it by
// pidfd_getfd, and setns into its network namespace. Three report lines,
// or one saying SO_PEERPIDFD is unavailable.
func peerPidfd(c int) {
	pidfd, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		fmt.Printf("%s (%v)\n", unavailablePeerPidfd, err)
		return
	}
	defer unix.Close(pidfd)
	ns, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(pidfd), pidfdGetNetNamespace, 0)
	if errno == 0 {
		unix.Close(int(ns))
		report("peer pidfd: ioctl(PIDFD_GET_NET_NAMESPACE)", nil)
	} else {
		report("peer pidfd: ioctl(PIDFD_GET_NET_NAMESPACE)", errno)
	}
	fd, err := unix.PidfdGetfd(pidfd, 0, 0)
	if err == nil {
		unix.Close(fd)
	}
	report("peer pidfd: pidfd_getfd(0)", err)
	report("peer pidfd: setns(CLONE_NEWNET)", unix.Setns(pidfd, unix.CLONE_NEWNET))
}

// report prints what's attempt did: the error, or "succeeded".
func report(what string, err error) {
	if err == nil {
		fmt.Println(what + ": succeeded")
		return
	}
	fmt.Printf("%s: refused (%v)\n", what, err)
}

// connectRaw is connect(2) with a raw address (AF_UNSPEC, which
// x/sys/unix has no Sockaddr for).
func connectRaw(fd int, sa *unix.RawSockaddrAny) error {
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(sa)), unix.SizeofSockaddrAny)
	if errno != 0 {
		return errno
	}
	return nil
}

// ownConnect connects a new unix socket, made in the box's network
// namespace, to sa.
func ownConnect(sa unix.Sockaddr) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}

// shutdownConnect stops the listener's reading side, then connects it.
func shutdownConnect(sa unix.Sockaddr) error {
	if err := unix.Shutdown(0, unix.SHUT_RD); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return unix.Connect(0, sa)
}

// inetSockaddr is addr (IPv4 ip:port) as a Sockaddr.
func inetSockaddr(addr string) (*unix.SockaddrInet4, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("probe target %q: %w", addr, err)
	}
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	return sa, nil
}

// interfaces is the box's network interfaces, "ifs=a,b,".
func interfaces() string {
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return "ifs: " + err.Error()
	}
	s := "ifs="
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && i >= 2 {
			s += strings.TrimSpace(name) + ","
		}
	}
	return s
}

// TestListenerStdinHostile hands a box a listening unix stream socket of
// the host's network namespace as fd 0, as the test bed's relay does,
// and runs listenerProbe in it: on the listener and on an accepted
// connection, connect(AF_UNSPEC), a connect to a host abstract unix
// address and to a host TCP port on loopback, a bind and a sendto must
// all fail, a pidfd of the accepted connection's peer (a root process
// of the host's; SO_PEERPIDFD, where the kernel has it) must give
// neither the peer's network namespace (pidfd ioctl, setns) nor its
// descriptors, a socket of the box's own must not reach the host's
// abstract address, the box must see lo alone, and the targets (which the test
// made, in the host's network namespace, on loopback) must get no
// connection. This keeps the claim that such a listener is safe beside
// --net none true on future kernels.
func TestListenerStdinHostile(t *testing.T) {
	testhost.RequireRoot(t)
	name := "@warden-native-test-" + randomHex(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stdin, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	abstract, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@warden-native-target-" + randomHex(t), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	tcp, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ws := probeWorkspace(t)
	s := spec.Spec{Command: []string{"/workspace/probe", probeArg}, Workspace: ws, Limits: spec.DefaultLimits,
		Env: []string{probeTargetEnv + "=" + abstract.Addr().String() + " " + tcp.Addr().String()}}
	s.Network.Mode = spec.NetNone
	s.Limits.Timeout = time.Minute
	c, err := net.DialTimeout("unix", name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := &testhost.SyncBuffer{}
	r, err := Runtime{ListenerStdin: stdin}.Run(context.Background(), s, IO{Stdout: out, Stderr: out})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("the probe's box: %v, exit %d; output:\n%s", err, r.ExitCode, out.String())
	}
	t.Logf("the probe in the box:\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := 14 // 13 attempts, the 3 of the peer's pidfd included, then ifs=lo,
	if strings.Contains(out.String(), unavailablePeerPidfd) {
		t.Log("the peer pidfd rows did not run: this kernel has no SO_PEERPIDFD (Linux 6.5)")
		want = 12
	}
	if len(lines) != want || lines[want-1] != "ifs=lo," {
		t.Errorf("the probe's output: got %d lines ending %q, want %d then ifs=lo,:\n%s", len(lines), lines[len(lines)-1], want-1, out.String())
	}
	for _, line := range lines {
		if strings.HasSuffix(line, "succeeded") {
			t.Errorf("in the box, %s; want it refused", line)
		}
	}
	noConnection(t, abstract)
	noConnection(t, tcp)
}

// noConnection checks l has no connection waiting.
func noConnection(t *testing.T, l interface {
	net.Listener
	SetDeadline(time.Time) error
}) {
	t.Helper()
	if err := l.SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err == nil {
		c.Close()
		t.Errorf("the target %s got a connection from the box", l.Addr())
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the target %s: %v", l.Addr(), err)
	}
}

// probeWorkspace is a workspace holding a copy of the test binary as
// probe, which the box can run.
func probeWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Chown(ws, 1000, 1000); err != nil { // a workspace is a regular user's
		t.Fatal(err)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	dst, err := os.OpenFile(filepath.Join(ws, "probe"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, self); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return ws
}

// randomHex is 12 random bytes in hex, for unique abstract names.
func randomHex(t *testing.T) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
