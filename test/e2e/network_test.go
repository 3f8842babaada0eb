package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With the default --net none the sandbox has its own network namespace
// holding only lo. These tests put listeners on the host's loopback and
// abstract socket namespace and check the sandbox reaches none of them;
// the only traffic leaving a sandbox goes to 192.0.2.1 (TEST-NET-1, never
// routed), and must not even leave.

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// netFlags bounds every network test's sandbox, so a connect that hangs
// instead of failing ends in a timed-out Result rather than a stuck test.
var netFlags = []string{"--timeout", "20s"}

// TestNetworkOnlyLoopback: the sandbox sees lo, up, and nothing else.
func TestNetworkOnlyLoopback(t *testing.T) {
	got := runProbe(t, netFlags, "ifaces")
	if w := "lo:up"; got["ifaces"] != w {
		t.Errorf("interfaces: got %s, want %s", got["ifaces"], w)
	}
	r := runJSON(t, "--", "cat", "/proc/net/dev")
	var names []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	if strings.Join(names, ",") != "lo" {
		t.Errorf("/proc/net/dev interfaces: got %q, want [lo]\n%s", names, r.Stdout)
	}
}

// TestNetworkUnroutable: with no route but lo, a connect to any outside
// address fails at once.
func TestNetworkUnroutable(t *testing.T) {
	got := runProbe(t, netFlags, "tcp", "192.0.2.1:80")
	if w := "errno=ENETUNREACH"; got["tcp"] != w {
		t.Errorf("connect 192.0.2.1:80: got %s, want %s", got["tcp"], w)
	}
}

// checkNoAccept fails if the listener has a connection waiting: any connect
// from the sandbox that reached it completed before the sandbox ended, so
// the connection is already queued and a deadline in the past finds it.
func checkNoAccept(t *testing.T, ln net.Listener) {
	t.Helper()
	type deadliner interface{ SetDeadline(time.Time) error }
	if err := ln.(deadliner).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err == nil {
		c.Close()
		t.Errorf("the host listener %s accepted a connection from the sandbox", ln.Addr())
		return
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("accept on %s: got %v, want a deadline error (no connection)", ln.Addr(), err)
	}
}

// TestNetworkHostLoopbackUnreachable: a service on the host's 127.0.0.1
// (a database, a metadata proxy, warden serve itself) is out of reach:
// 127.0.0.1 inside is the sandbox's own lo, where nothing listens.
func TestNetworkHostLoopbackUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := runProbe(t, netFlags, "tcp", ln.Addr().String())
	if w := "errno=ECONNREFUSED"; got["tcp"] != w {
		t.Errorf("connect %s: got %s, want %s", ln.Addr(), got["tcp"], w)
	}
	checkNoAccept(t, ln)
}

// TestNetworkHostAbstractSocketUnreachable: abstract unix sockets belong to
// the network namespace; the host's (D-Bus, X11, containerd's shims use
// them) must not answer from inside.
func TestNetworkHostAbstractSocketUnreachable(t *testing.T) {
	name := "@warden-e2e-" + randomSuffix(t)
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := runProbe(t, netFlags, "unix", name)
	if w := "errno=ECONNREFUSED"; got["unix"] != w {
		t.Errorf("connect %s: got %s, want %s", name, got["unix"], w)
	}
	checkNoAccept(t, ln)
}

// TestNetworkHostUnixSocketFileInvisible: a unix socket file in the host's
// /tmp (where services like to put them) is not in the sandbox's /tmp.
func TestNetworkHostUnixSocketFileInvisible(t *testing.T) {
	requireSandbox(t)
	path := filepath.Join("/tmp", "warden-e2e-"+randomSuffix(t)+".sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := runProbe(t, netFlags, "stat", path)
	if w := "errno=ENOENT"; got[path] != w {
		t.Errorf("stat %s: got %s, want %s", path, got[path], w)
	}
	got = runProbe(t, netFlags, "unix", path)
	if w := "errno=ENOENT"; got["unix"] != w {
		t.Errorf("connect %s: got %s, want %s", path, got["unix"], w)
	}
	checkNoAccept(t, ln)
}

// TestNetworkNoDNS: the sandbox resolves no names itself, through libc or
// Go's own resolver; both fail without waiting for a server.
func TestNetworkNoDNS(t *testing.T) {
	got := runProbe(t, netFlags, "lookup", "example.com")
	if w := "failed"; got["lookup"] != w {
		t.Errorf("Go LookupHost(example.com): got %s, want %s", got["lookup"], w)
	}
	r := runJSON(t, append(netFlags, "--", "python3", "-c", `
import socket
try:
    print("resolved", socket.getaddrinfo("example.com", 80))
except socket.gaierror as e:
    print("gaierror")
`)...)
	if got, w := strings.TrimSpace(r.Stdout), "gaierror"; got != w || r.TimedOut {
		t.Errorf("getaddrinfo(example.com): got %q (timed out %v, stderr %q), want %q", got, r.TimedOut, r.Stderr, w)
	}
}
