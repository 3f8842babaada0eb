package e2e

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// The egress tests stand a web server in for the internet at 3ffe:b00::7
// (see startInternet). Names are pinned with WARDEN_EGRESS_HOSTS, as an
// operator would.
const internetIP = "3ffe:b00::7"

// internet is the stand-in: a plain and a TLS server, and a directory
// holding its CA certificate for the sandbox.
type internet struct {
	httpPort, tlsPort int
	workspace         string
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// proxied runs a shell snippet with --net proxy and the given rules, with
// the stand-in's CA in the workspace.
func (n *internet) proxied(t *testing.T, script string, rules ...string) spec.Result {
	t.Helper()
	flags := append([]string{"--net", "proxy", "--workspace", n.workspace, "--timeout", "30s"}, rules...)
	return sh(t, script, flags...)
}

func TestEgressAllowedHost(t *testing.T) {
	n := startInternet(t)
	hp, tp := strconv.Itoa(n.httpPort), strconv.Itoa(n.tlsPort)
	tests := []struct {
		name, script, want string
	}{
		{"curl http", "curl -sS http://allowed.test:" + hp + "/a", "hello from the internet, /a"},
		{"curl https", "curl -sS --cacert ca.pem https://allowed.test:" + tp + "/b", "hello from the internet, /b"},
		{"python http", "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://allowed.test:" + hp + "/c\").read().decode(), end=\"\")'", "hello from the internet, /c"},
		{"python https", "python3 -c 'import ssl, urllib.request as u; c = ssl.create_default_context(cafile=\"ca.pem\"); print(u.urlopen(\"https://allowed.test:" + tp + "/d\", context=c).read().decode(), end=\"\")'", "hello from the internet, /d"},
	}
	for _, tt := range tests {
		r := n.proxied(t, tt.script, "--allow", "allowed.test:"+hp, "--allow", "allowed.test:"+tp)
		if r.ExitCode != 0 || r.Stdout != tt.want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", tt.name, r.ExitCode, r.Stdout, r.Stderr, tt.want)
		}
		if len(r.Network) == 0 || !r.Network[0].Allowed || r.Network[0].Host != "allowed.test" {
			t.Errorf("%s: network log %+v, want an allowed request to allowed.test", tt.name, r.Network)
		}
	}
}

// TestEgressDenied: everything not allowed gets a 403 with a reason,
// whatever the notation; the sandbox never reaches a denied address.
func TestEgressDenied(t *testing.T) {
	n := startInternet(t)
	local := listen(t, "127.0.0.1:0")
	var reached atomic.Int64
	go func() {
		for {
			c, err := local.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { local.Close() })
	hp, lp := strconv.Itoa(n.httpPort), strconv.Itoa(port(local))
	tests := []struct {
		name, url, reason string
	}{
		{"not on the list", "http://other.test:" + hp + "/", "no --allow rule"},
		{"denied by rule", "http://example.com:" + hp + "/", "deny"},
		{"loopback name", "http://local.test:" + lp + "/", "loopback"},
		{"rebinding name", "http://rebind.test:" + lp + "/", "warden egress"},
		{"loopback literal", "http://127.0.0.1:" + lp + "/", "loopback"},
		{"short literal", "http://127.1:" + lp + "/", "loopback"},
		{"decimal literal", "http://2130706433:" + lp + "/", "loopback"},
		{"hex literal", "http://0x7f000001:" + lp + "/", "loopback"},
		{"octal literal", "http://0177.0.0.1:" + lp + "/", "loopback"},
		{"mapped literal", "http://[::ffff:127.0.0.1]:" + lp + "/", "loopback"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"metadata decimal", "http://2852039166/", "link-local"},
		{"private", "http://10.0.0.1/", "private"},
		{"the proxy itself", "http://127.0.0.1:3128/", "loopback"},
	}
	rules := []string{"--allow", "allowed.test", "--allow", "rebind.test:" + lp, "--allow", "local.test:" + lp,
		"--allow", "example.com:" + hp, "--deny", "example.com"}
	for _, tt := range tests {
		// --noproxy '' sends even 127.0.0.1 to the proxy (NO_PROXY keeps
		// it local by default, where it reaches only the sandbox's own lo).
		r := n.proxied(t, "curl --noproxy '' -sS -o /dev/null -w '%{http_code}' "+tt.url+"; echo; curl --noproxy '' -s "+tt.url, rules...)
		code, _, _ := strings.Cut(r.Stdout, "\n")
		if (code != "403" && code != "502") || !strings.Contains(r.Stdout, tt.reason) {
			t.Errorf("%s: %s = stdout %q, stderr %q; want a refusal mentioning %q", tt.name, tt.url, r.Stdout, r.Stderr, tt.reason)
		}
	}
	if got := reached.Load(); got != 0 {
		t.Errorf("the loopback listener saw %d connections, want none", got)
	}
}

// TestEgressNoBypass: with the proxy, nothing but the bridge leads out;
// with --net none, not even that.
func TestEgressNoBypass(t *testing.T) {
	n := startInternet(t)
	hp := strconv.Itoa(n.httpPort)
	r := n.proxied(t, "curl -sS --noproxy '*' --max-time 5 http://["+internetIP+"]:"+hp+"/ || echo blocked", "--allow", "allowed.test")
	if !strings.Contains(r.Stdout, "blocked") {
		t.Errorf("a direct connect around the proxy = %q %q, want it to fail", r.Stdout, r.Stderr)
	}
	r = sh(t, "curl -sS --max-time 5 -x http://127.0.0.1:3128 http://allowed.test:"+hp+"/ || echo blocked")
	if !strings.Contains(r.Stdout, "blocked") {
		t.Errorf("--net none through a would-be proxy = %q, want no way out", r.Stdout)
	}
}

// TestEgressSession: a session made with the proxy reaches allowed hosts,
// logs each decision, and takes new rules live, on every backend and
// over either transport to its agent (native's bridge reaches the proxy
// by its own descriptor, not through the agent's connection; microvm's
// and gVisor's over the stream by a channel of the agent stream per
// connection).
func TestEgressSession(t *testing.T) {
	n := startInternet(t)
	for _, b := range sessionRows(conformanceBackends(t)) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			testEgressSession(t, n, b)
		})
	}
}

func testEgressSession(t *testing.T, n *internet, b string) {
	srv := startServer(t, backendArgs(b)...)
	hp := strconv.Itoa(n.httpPort)
	id := srv.newSession(t, keyA, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.test:" + hp}}})
	curl := map[string]any{"command": []string{"curl", "-s", "http://allowed.test:" + hp + "/s"}}
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), curl, http.StatusOK, &r)
	if r.Stdout != "hello from the internet, /s" || len(r.Network) != 1 {
		t.Fatalf("session curl = %q (network %+v), want the page and one logged decision", r.Stdout, r.Network)
	}
	srv.jsonCall(t, keyA, "PUT", sessionPath(id, "/network"), map[string]any{"allow": []string{"other.test"}}, http.StatusOK, nil)
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), curl, http.StatusOK, &r)
	if !strings.Contains(r.Stdout, "warden egress: denied") {
		t.Errorf("after the rules changed curl = %q, want a denial", r.Stdout)
	}
	var log struct {
		Events []spec.NetworkEvent `json:"events"`
	}
	srv.jsonCall(t, keyA, "GET", sessionPath(id, "/network"), nil, http.StatusOK, &log)
	if len(log.Events) != 2 || !log.Events[0].Allowed || log.Events[1].Allowed {
		t.Errorf("network log = %+v, want one allowed then one denied", log.Events)
	}
	none := srv.newSession(t, keyA, nil)
	if code, b := srv.call(t, keyA, "PUT", sessionPath(none, "/network"), strings.NewReader(`{"allow":["allowed.test"]}`), "application/json"); code != http.StatusBadRequest {
		t.Errorf("opening a network none session = %d %s, want 400", code, b)
	}
}
