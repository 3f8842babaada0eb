package kubeback_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/kubeback"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// testEgress: a session with --net proxy reaches an allowed stand-in
// origin through the router's egress proxy (the Pod's bridge on its
// 127.0.0.1:3128, HTTP_PROXY in its execs) and is refused (403, audited)
// for another; SetNetwork is recorded on the claim, and a replica that
// re-attaches the session applies the rules last in force; a --net none
// session has no bridge. The bed's Pods share the host's network
// namespace (no NetworkPolicy holds there), so the proof that a request
// went through the proxy is the proxy's audit of it; for the same reason
// it holds the host's port 3128 against poddial's TestPodEgress.
func testEgress(ctx context.Context, t *testing.T, bed *kubebed.Bed, admin *podclaim.Claimer) {
	testhost.HoldHostPort(t, agent.EgressPort)
	o := startOrigin(t)
	port := o.http
	first, _ := replica(t, bed)
	allowed := "allowed.test:" + strconv.Itoa(port)
	info, err := first.Create(ctx, owner, sandbox.SessionOptions{
		Limits: spec.DefaultLimits, TTL: time.Hour,
		Network: spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{allowed}},
	})
	if err != nil {
		t.Fatalf("Create with --net proxy: %v", err)
	}
	get := func(m *sandbox.Manager, host string) string {
		t.Helper()
		return run(ctx, t, m, info.ID, sh(fmt.Sprintf("curl -sS -m 20 -w ' %%{http_code}' http://%s:%d/hi", host, port)))
	}
	if got, want := get(first, "allowed.test"), "hello from the stand-in, /hi 200"; got != want {
		t.Errorf("the allowed origin through the proxy: got %q, want %q", got, want)
	}
	if got := get(first, "other.test"); !strings.HasSuffix(got, " 403") {
		t.Errorf("an origin not allowed: got %q, want the proxy's 403", got)
	}
	events, err := first.NetworkEvents(context.Background(), owner, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(events, "allowed.test", port, true) || !hasEvent(events, "other.test", port, false) {
		t.Errorf("the proxy's audit = %+v, want allowed.test allowed and other.test refused", events)
	}
	other := "other.test:" + strconv.Itoa(port)
	if _, err := first.SetNetwork(context.Background(), owner, info.ID, []string{allowed, other}, nil); err != nil {
		t.Fatalf("SetNetwork: %v", err)
	}
	ps, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ps.Network.Allow, []string{allowed, other}) || ps.Network.Mode != spec.NetProxy {
		t.Errorf("the claim records %+v after SetNetwork, want proxy allowing %s and %s", ps.Network, allowed, other)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, _ := replica(t, bed)
	if got := get(second, "other.test"); !strings.HasSuffix(got, " 200") {
		t.Errorf("after the re-attach by another replica, other.test (allowed by SetNetwork): got %q, want 200", got)
	}
	if events, err := second.NetworkEvents(context.Background(), owner, info.ID); err != nil || !hasEvent(events, "other.test", port, true) {
		t.Errorf("the re-attaching replica's audit = %+v, %v; want other.test allowed", events, err)
	}
	if err := second.Delete(ctx, owner, info.ID); err != nil {
		t.Fatal(err)
	}
	testNoBridge(ctx, t, second)
	t.Run("latency", func(t *testing.T) { testEgressLatency(ctx, t, second, o) })
}

// testNoBridge: a --net none session's Pod has no bridge (nothing
// listens on 127.0.0.1:3128: the bed's Pods share the host's loopback,
// so this runs with no proxy session open) and no proxy environment.
func testNoBridge(ctx context.Context, t *testing.T, m *sandbox.Manager) {
	info := create(ctx, t, m, time.Hour)
	defer func() {
		if err := m.Delete(ctx, owner, info.ID); err != nil {
			t.Error(err)
		}
	}()
	r, err := m.Exec(ctx, owner, info.ID, sh(fmt.Sprintf("env | grep -i _proxy=; curl -sS -m 5 http://127.0.0.1:%d/", agent.EgressPort)), sandbox.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == 0 || strings.Contains(r.Stdout, "_proxy=") || strings.Contains(strings.ToLower(r.Stdout), "proxy=") {
		t.Errorf("a --net none session reached 127.0.0.1:%d or has a proxy environment: %+v", agent.EgressPort, r)
	}
}

// hasEvent is whether events hold a decision for host:port that allowed
// it (or refused it).
func hasEvent(events []spec.NetworkEvent, host string, port int, allowed bool) bool {
	return slices.ContainsFunc(events, func(e spec.NetworkEvent) bool {
		return e.Host == host && e.Port == port && e.Allowed == allowed
	})
}

// origin is the stand-in internet origin's ports on its one address:
// plain HTTP, and HTTPS with httptest's certificate (curl -k takes it).
type origin struct{ http, https int }

// startOrigin starts a stand-in internet origin on a global unicast
// address the proxy counts as public (3ffe::/16, the 6bone's, returned
// in 2006 and routed nowhere since), in a network namespace of the
// test's own joined to the host by a veth pair, pins allowed.test and
// other.test to it for the egress proxy (agent.HostsEnv, read when the
// process's proxy starts: no other test of this binary starts it
// first), and returns its ports. Everything is removed at the end.
func startOrigin(t *testing.T) origin {
	t.Helper()
	testhost.RequireTool(t, "ip")
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	tag := hex.EncodeToString(b[:])
	ns, host, peer := "wke-"+tag, "wke"+tag+"h", "wke"+tag+"n"
	prefix := "3ffe:b02:" + tag[:4] + ":"
	public, link := prefix+":7", prefix+"1::"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	cleanup := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Logf("cleanup: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { cleanup("netns", "del", ns) })
	ip("link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	t.Cleanup(func() { cleanup("link", "del", host) })
	ip("link", "set", host, "up")
	ip("-n", ns, "link", "set", peer, "up")
	ip("-n", ns, "link", "set", "lo", "up")
	ip("addr", "add", link+"1/64", "dev", host, "nodad")
	ip("-n", ns, "addr", "add", link+"2/64", "dev", peer, "nodad")
	ip("-n", ns, "addr", "add", public+"/128", "dev", "lo", "nodad")
	ip("-6", "route", "replace", public+"/128", "via", link+"2", "dev", host)
	t.Cleanup(func() { cleanup("-6", "route", "del", public+"/128", "dev", host) })
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the stand-in, %s", r.URL.Path)
	})
	ln := listenIn(t, ns, net.JoinHostPort(public, "0"))
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: hello}
	go func() { _ = srv.Serve(ln) }()     // ends with Close below
	t.Cleanup(func() { _ = srv.Close() }) // a stand-in's close error changes nothing the test checked
	tls := httptest.NewUnstartedServer(hello)
	if err := tls.Listener.Close(); err != nil { // httptest's own loopback listener, replaced
		t.Fatal(err)
	}
	tls.Listener = listenIn(t, ns, net.JoinHostPort(public, "0"))
	tls.StartTLS()
	t.Cleanup(tls.Close)
	t.Setenv(agent.HostsEnv, "allowed.test="+public+",other.test="+public)
	return origin{ln.Addr().(*net.TCPAddr).Port, tls.Listener.Addr().(*net.TCPAddr).Port}
}

// listenIn listens on addr in the network namespace ns (a socket stays
// in the namespace it was made in): on a thread of its own that enters
// ns and comes back, or is left to die with its goroutine if it cannot.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer home.Close()
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
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		} // else the thread, still locked, ends with this goroutine
		done <- result{ln, lerr}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("listening on %s in %s: %v", addr, ns, r.err)
	}
	return r.ln
}
