package agent

import (
	"fmt"
	"net"
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

// AttachEgress gives the sandbox named name its own socket on this
// process's egress proxy, with n's rules and the connection pace of cpus
// cores of quota (egress.ConnPace), starting the proxy on first use.
func AttachEgress(name string, n spec.NetworkPolicy, cpus float64) (*egress.Attachment, error) {
	pol, err := egress.ParsePolicy(n.Allow, n.Deny)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err) //nolint:errorlint // the sentinel is the category callers match; the parse error is text only, so nothing inside it can change the answer
	}
	p, err := sharedProxy()
	if err != nil {
		return nil, fmt.Errorf("starting the egress proxy: %w", err)
	}
	a, err := p.Attach(name, pol, egress.ConnPace(cpus))
	if err != nil {
		return nil, fmt.Errorf("attaching to the egress proxy: %w", err)
	}
	return a, nil
}

// AttachEgressFor gives a sandbox of s named name its own socket on this
// process's egress proxy (AttachEgress) when s asks for the proxy, and
// nil without it: every backend's one check of the mode before it
// attaches, so none attaches a box of network none by mistake.
func AttachEgressFor(name string, s spec.Spec) (*egress.Attachment, error) {
	if s.Network.Mode != spec.NetProxy {
		return nil, nil
	}
	return AttachEgress(name, s.Network, s.Limits.CPUs)
}

// SetNetwork replaces a session's allow and deny rules; connections
// already open keep going, new ones meet the new rules. A session made
// without the proxy has no way out to open: it must be created with it.
func (s *Session) SetNetwork(allow, deny []string) error {
	if s.f.Egress == nil {
		return fmt.Errorf("%w: the session was created with network none, which has no way out to open; create a session with network proxy", spec.ErrInvalid)
	}
	n := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow, Deny: deny}
	if err := n.Validate(); err != nil {
		return err
	}
	pol, err := egress.ParsePolicy(allow, deny)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalid, err) //nolint:errorlint // the sentinel is the category callers match; the parse error is text only, so nothing inside it can change the answer
	}
	s.f.Egress.SetPolicy(pol)
	s.mu.Lock()
	s.f.Spec.Network = n
	s.mu.Unlock()
	return nil
}

// NetworkEvents are the egress proxy's decisions for the session so far.
func (s *Session) NetworkEvents() []spec.NetworkEvent {
	if s.f.Egress == nil {
		return nil
	}
	return s.f.Egress.Events()
}

// ServeEgressLink answers a boxed init's egress link (see nsinit's
// egressLink) until it closes: each request byte gets one byte back with
// a fresh connection to a's socket attached. The box cannot reach the
// socket by a path, and the link is held by its init alone.
func ServeEgressLink(link *os.File, a *egress.Attachment) {
	defer link.Close()
	fd := int(link.Fd())
	req := make([]byte, 1)
	for {
		if n, err := link.Read(req); n == 0 || err != nil {
			return
		}
		c, err := net.Dial("unix", a.SocketPath())
		if err != nil {
			// A failed answer means the box's end is gone: the next Read ends the loop.
			_, _ = link.Write([]byte{0})
			continue
		}
		f, err := c.(*net.UnixConn).File()
		c.Close()
		if err != nil {
			// As above: the next Read finds a link that is gone.
			_, _ = link.Write([]byte{0})
			continue
		}
		err = unix.Sendmsg(fd, []byte{0}, unix.UnixRights(int(f.Fd())), nil, unix.MSG_NOSIGNAL)
		f.Close()
		if err != nil {
			return
		}
	}
}
