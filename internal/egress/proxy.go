// Package egress is Warden's egress proxy: the only way out of a sandbox
// run with --net proxy. One Proxy serves every sandbox of a Warden
// process; each sandbox is attached with its own policy and its own unix
// socket, so the proxy knows which sandbox asks from the socket a
// connection arrived on, never from anything the sandbox says.
//
// On each connection the proxy speaks HTTP/1.1: CONNECT host:port opens a
// tunnel, and an absolute-form request (GET http://host/path) is forwarded
// as one request per connection, answered with Connection: close. The
// proxy resolves names itself and checks every address at dial time, in
// the dialer's Control hook, dialling exactly the address it checked, so
// DNS rebinding cannot turn an allowed name into a loopback, private or
// metadata address. Loopback, private, link-local and the other non-public
// classes (see Classify) are refused whatever the rules say. The proxy
// listens on no TCP port, and loopback and unspecified addresses are
// refused, so no request can reach the proxy or the sandbox's bridge.
//
// Every refusal is an HTTP answer with a one-line text/plain reason the
// agent can read (403 for policy, 429 for the connection limit, 400 for a
// malformed request, 502 and 504 for upstream failures), and every
// decision is recorded as a spec.NetworkEvent.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Resolver looks up a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is the proxy's process-wide setup; policies are per attachment.
type Config struct {
	// Resolver looks names up; nil means net.DefaultResolver. Tests and
	// operators may pin names with Hosts.
	Resolver Resolver
	// Hosts maps names to addresses, consulted before Resolver. The
	// addresses are still checked like resolved ones.
	Hosts map[string][]netip.Addr
	// DialTimeout bounds resolving and connecting for one request
	// (0: 10 s).
	DialTimeout time.Duration
	// Dir holds the per-sandbox socket directories (default
	// /run/warden/egress, made 0700).
	Dir string
}

// DefaultDir is where sockets live when Config.Dir is empty.
const DefaultDir = "/run/warden/egress"

// Proxy is the egress proxy of one Warden process.
type Proxy struct {
	cfg   Config
	hosts map[string][]netip.Addr

	// paceWait waits for a paced connection's turn (sleep; tests park
	// it instead).
	paceWait func(context.Context, time.Duration) error

	mu       sync.Mutex
	attached map[string]*Attachment
	closed   bool
}

// New checks cfg, fills its defaults and prepares the socket directory.
func New(cfg Config) (*Proxy, error) {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	hosts := make(map[string][]netip.Addr, len(cfg.Hosts))
	for name, addrs := range cfg.Hosts {
		n := normHost(name)
		if !validName(n) {
			return nil, fmt.Errorf("egress: Hosts entry %q is not a host name", name)
		}
		hosts[n] = addrs
	}
	if err := prepareDir(cfg.Dir); err != nil {
		return nil, err
	}
	return &Proxy{cfg: cfg, hosts: hosts, attached: map[string]*Attachment{}, paceWait: sleep}, nil
}

// Attach starts serving one sandbox under pol on a new socket, which the
// caller binds into the sandbox for its bridge, handing on connections at
// pace (see ConnPace; the zero Pace for none). A sandbox is attached at
// most once at a time.
func (p *Proxy) Attach(sandbox string, pol Policy, pace Pace) (*Attachment, error) {
	if !validSandbox(sandbox) {
		return nil, fmt.Errorf("egress: sandbox name %q must be 1..64 letters, digits, '_', '-' or '.'", sandbox)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("egress: the proxy is closed")
	}
	if _, ok := p.attached[sandbox]; ok {
		return nil, fmt.Errorf("egress: sandbox %s is already attached", sandbox)
	}
	ln, dir, err := listenSocket(p.cfg.Dir, sandbox)
	if err != nil {
		return nil, err
	}
	a := newAttachment(p, sandbox, ln, dir, pol, pace)
	p.attached[sandbox] = a
	return a, nil
}

// Close detaches every sandbox.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	atts := make([]*Attachment, 0, len(p.attached))
	for _, a := range p.attached {
		atts = append(atts, a)
	}
	p.mu.Unlock()
	var errs []error
	for _, a := range atts {
		errs = append(errs, a.Close())
	}
	return errors.Join(errs...)
}

// detach forgets a closed attachment.
func (p *Proxy) detach(a *Attachment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attached[a.sandbox] == a {
		delete(p.attached, a.sandbox)
	}
}

// validSandbox keeps sandbox names safe as a path component.
func validSandbox(s string) bool {
	return s != "" && len(s) <= 64 && s[0] != '.' &&
		strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == ""
}
