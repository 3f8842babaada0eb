package gvisor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// internet is a stand-in for the internet the egress proxy reaches: an
// HTTP server on a public-looking IPv6 address (3ffe::/16, the retired
// 6bone, which the proxy classifies as public) on the loopback of a
// network namespace the test made, routed to from the host over a veth
// pair. Nothing leaves the host.
type internet struct {
	// ip is the server's address, port its port.
	ip   string
	port int
}

// url is the address of path on the server, as the box asks the proxy.
func (n internet) url(path string) string {
	return "http://" + net.JoinHostPort(n.ip, fmt.Sprint(n.port)) + path
}

// rule is the allow rule for the server alone.
func (n internet) rule() string { return net.JoinHostPort(n.ip, fmt.Sprint(n.port)) }

// startInternet builds the namespace and its server, torn down when t
// ends. The server answers every path with "hello from the internet,
// PATH".
func startInternet(t *testing.T) internet {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		testhost.SkipOrFail(t, "the stand-in internet needs ip (iproute2)")
	}
	suffix := randomHex(t, 2)
	ns := "wgv-" + suffix
	host, peer := ns+"h", ns+"n"
	// A link network and address of its own per test, so tests on a
	// shared host do not meet.
	link := "3ffe:b01:" + suffix + "::"
	n := internet{ip: "3ffe:b02:" + suffix + "::7"}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { logIP(t, "netns", "del", ns) })
	run("link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	t.Cleanup(func() { logIP(t, "link", "del", host) })
	run("link", "set", host, "up")
	run("-n", ns, "link", "set", peer, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("addr", "add", link+"1/64", "dev", host, "nodad")
	run("-n", ns, "addr", "add", link+"2/64", "dev", peer, "nodad")
	run("-n", ns, "addr", "add", n.ip+"/128", "dev", "lo", "nodad")
	run("-6", "route", "replace", n.ip+"/128", "via", link+"2", "dev", host)
	t.Cleanup(func() { logIP(t, "-6", "route", "del", n.ip+"/128", "dev", host) })
	ln := listenIn(t, ns, net.JoinHostPort(n.ip, "0"))
	n.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the internet, %s", r.URL.Path)
	})}
	go func() {
		// Serve returns when the cleanup closes the server
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Logf("closing the stand-in internet's server: %v", err)
		}
	})
	return n
}

// listenIn listens on addr in network namespace ns (by name): the socket
// is made there by a thread that enters ns and leaves it again.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("entering %s: %w", ns, err)}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked, so it ends with this goroutine
			// rather than serve others in the wrong namespace.
			done <- result{ln, fmt.Errorf("leaving %s: %w", ns, err)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{ln, lerr}
	}()
	r := <-done
	if r.err != nil {
		if r.ln != nil {
			r.ln.Close()
		}
		t.Fatalf("listening on %s in %s: %v", addr, ns, r.err)
	}
	return r.ln
}

// logIP runs a cleanup's ip command, logging its failure.
func logIP(t *testing.T, args ...string) {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Logf("cleanup: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// randomHex is n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
