package native

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/spec"
)

// EgressPort is where, on its own loopback, a sandbox with --net proxy
// finds the proxy (through the init's bridge): 3128, the port proxies
// customarily use.
const EgressPort = 3128

// proxyEnv points every common HTTP client at the bridge, and keeps local
// traffic off it.
var proxyEnv = func() []string {
	url := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return []string{
		"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url,
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
	}
}()

// The one egress proxy of this Warden process, started on first use.
var (
	proxyOnce sync.Once
	proxy     *egress.Proxy
	proxyErr  error
)

// HostsEnv names the environment variable that pins names for the egress
// proxy ("name=ip,name=ip"), as /etc/hosts would: for tests and for
// operators who must not depend on DNS. Pinned addresses are classified
// like any other; a pin cannot open a private address.
const HostsEnv = "WARDEN_EGRESS_HOSTS"

func sharedProxy() (*egress.Proxy, error) {
	proxyOnce.Do(func() {
		cfg := egress.Config{Dir: egressDir()}
		if cfg.Hosts, proxyErr = parseHosts(os.Getenv(HostsEnv)); proxyErr != nil {
			return
		}
		proxy, proxyErr = egress.New(cfg)
	})
	return proxy, proxyErr
}

// egressDir holds the proxy's sockets: under /run as root, in the user's
// own temporary directory otherwise.
func egressDir() string {
	if os.Geteuid() == 0 {
		return "/run/warden/egress"
	}
	return filepath.Join(os.TempDir(), "warden-egress-"+strconv.Itoa(os.Geteuid()))
}

// parseHosts reads "name=ip,name=ip".
func parseHosts(s string) (map[string][]netip.Addr, error) {
	hosts := map[string][]netip.Addr{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, ip, ok := strings.Cut(pair, "=")
		addr, err := netip.ParseAddr(ip)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%s: %q is not name=ip", HostsEnv, pair)
		}
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		hosts[name] = append(hosts[name], addr)
	}
	return hosts, nil
}

// attachEgress gives the sandbox its own socket on the proxy, and the init
// a way to it, when the spec asks for the proxy.
func (b *box) attachEgress(name string) error {
	n := b.spec.Network
	if n.Mode != spec.NetProxy {
		return nil
	}
	pol, err := egress.ParsePolicy(n.Allow, n.Deny)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	p, err := sharedProxy()
	if err != nil {
		return fmt.Errorf("starting the egress proxy: %w", err)
	}
	if b.egress, err = p.Attach(name, pol); err != nil {
		return fmt.Errorf("attaching to the egress proxy: %w", err)
	}
	fd, err := unix.Open(b.egress.SocketPath(), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the egress socket: %w", err)
	}
	b.child.egress = os.NewFile(uintptr(fd), "egress")
	return nil
}

// env is a process's environment in this sandbox: the base, the proxy's
// when there is one, then extra.
func (b *box) env(extra []string) []string {
	if b.egress != nil {
		extra = append(append([]string(nil), proxyEnv...), extra...)
	}
	return buildEnv(extra)
}

// egressPort is the bridge's port, or 0 without the proxy.
func (b *box) egressPort() int {
	if b.egress == nil {
		return 0
	}
	return EgressPort
}

// SetNetwork replaces a session's allow and deny rules; connections
// already open keep going, new ones meet the new rules. A session made
// without the proxy has no way out to open: it must be created with it.
func (s *Session) SetNetwork(allow, deny []string) error {
	if s.b.egress == nil {
		return fmt.Errorf("%w: the session was created with network none, which has no way out to open; create a session with network proxy", spec.ErrInvalid)
	}
	n := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow, Deny: deny}
	if err := n.Validate(); err != nil {
		return err
	}
	pol, err := egress.ParsePolicy(allow, deny)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	s.b.egress.SetPolicy(pol)
	s.mu.Lock()
	s.b.spec.Network = n
	s.mu.Unlock()
	return nil
}

// NetworkEvents are the egress proxy's decisions for the session so far.
func (s *Session) NetworkEvents() []spec.NetworkEvent {
	if s.b.egress == nil {
		return nil
	}
	return s.b.egress.Events()
}
