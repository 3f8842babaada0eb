package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/agent"
)

// qemuHostAlias is where QEMU's user-mode network (slirp) answers for the
// host's loopback: a VM given such a network would reach the test's
// listener there.
const qemuHostAlias = "10.0.2.2"

// maxHostAddrs bounds the host addresses reachProbe tries.
const maxHostAddrs = 16

// reachProbe, given a URL and targets (host:port), fetches the URL through
// the proxy, prints it, then connects straight to each target and prints
// a line for each: the target and the errno's name, "connected" or
// "timeout". Every connect is bounded by 5 s.
const reachProbe = `python3 -c '
import errno, socket, sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
for t in sys.argv[2:]:
    host, port = t.rsplit(":", 1)
    host = host.strip("[]")
    try:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:
        print(t, errno.errorcode.get(e.errno, e.errno))
        continue
    s.settimeout(5)
    try:
        s.connect((host, int(port)))
        print(t, "connected")
    except socket.timeout:
        print(t, "timeout")
    except OSError as e:
        print(t, errno.errorcode.get(e.errno, e.errno))
    finally:
        s.close()
'`

// noRoute are the answers of a connect that found no way to its address:
// no route, or (a guest kernel without IPv6) no IPv6 at all.
var noRoute = map[string]bool{"ENETUNREACH": true, "EHOSTUNREACH": true, "EAFNOSUPPORT": true}

// TestEgressOnlyTheProxy: with --net proxy a box's one way out is the
// proxy. A page through it arrives, while a raw connect to the test's
// listener on the host's loopback reaches only the box's own lo
// (refused, and the listener sees nothing), and one to any of the host's
// addresses, to the stand-in internet itself or (microvm only) to QEMU's
// user-network host alias finds no route. On microvm this is the VM having
// no network device: only the bridge's channels lead out.
func TestEgressOnlyTheProxy(t *testing.T) {
	n := startInternet(t)
	ln := loopbackListener(t)
	lp := strconv.Itoa(port(ln))
	hp := strconv.Itoa(n.httpPort)
	common := []string{net.JoinHostPort(internetIP, hp)}
	for _, a := range hostAddrs(t) {
		common = append(common, net.JoinHostPort(a.String(), lp))
	}
	url := "http://allowed.test:" + hp + "/only"
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			targets := reachTargets(b, common, lp)
			script := reachProbe + " " + url + " 127.0.0.1:" + lp + " " + strings.Join(targets, " ")
			r := sh(t, script, "--backend", b, "--net", "proxy", "--allow", "allowed.test:"+hp, "--timeout", "120s")
			lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
			if r.ExitCode != 0 || len(lines) != len(targets)+2 || lines[0] != "hello from the internet, /only" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want the page through the proxy, then one line per target", r.ExitCode, r.Stdout, r.Stderr)
			}
			t.Logf("raw connects from the box: %q", lines[1:])
			if want := "127.0.0.1:" + lp + " ECONNREFUSED"; lines[1] != want {
				t.Errorf("the host's loopback listener from the box: got %q, want %q (the box's own lo)", lines[1], want)
			}
			for _, l := range lines[2:] {
				target, got, _ := strings.Cut(l, " ")
				if !noRoute[got] {
					t.Errorf("a raw connect to %s from the box: got %s, want no route (%v)", target, got, noRoute)
				}
			}
		})
	}
	checkNoAccept(t, ln)
}

// reachTargets are the raw-connect targets of backend b: common, plus on
// microvm QEMU's host alias. Only there does the alias mean anything (a
// slirp netdev would answer it on the host's loopback); on another backend
// a broken box with the host's network would send the probe to whatever
// 10.0.2.2 is on the host's LAN, and hostile tests send traffic only to
// loopback or a netns the test made.
func reachTargets(b string, common []string, lp string) []string {
	if b != "microvm" {
		return common
	}
	return append(slices.Clip(common), net.JoinHostPort(qemuHostAlias, lp))
}

// loopbackListener listens on the host's 127.0.0.1, on a port other than
// the bridge's (which answers on the box's own lo).
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln := listen(t, "127.0.0.1:0")
	if port(ln) == agent.EgressPort {
		ln.Close()
		ln = listen(t, "127.0.0.1:0")
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// hostAddrs are this host's own addresses but loopback and link-local
// ones (which need a zone), at most maxHostAddrs of them.
func hostAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			t.Fatal(fmt.Errorf("host address %q: %w", a, err))
		}
		ip := p.Addr().Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || len(out) == maxHostAddrs {
			continue
		}
		out = append(out, ip)
	}
	return out
}
