package kubebed

import (
	"crypto/rand"
	"errors"
	"net/netip"
	"sync"
)

// addrPool hands out the Pod addresses of one simulated node: the hosts
// .1 to .254 of a /24 inside 127.0.0.0/8 picked at random (never
// 127.0.0.0/24), so that beds run side by side, by other tests or other
// checkouts on the same machine, rarely share addresses. Linux routes all
// of 127.0.0.0/8 to loopback.
type addrPool struct {
	mu   sync.Mutex
	base [3]byte
	used [256]bool
}

// newAddrPool picks the pool's /24.
func newAddrPool() (*addrPool, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &addrPool{base: [3]byte{127, b[0]%254 + 1, b[1]}}, nil
}

// errPoolFull is the answer when all 254 addresses are in use.
var errPoolFull = errors.New("all 254 Pod addresses of the simulated node are in use")

// get takes a free address.
func (p *addrPool) get() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for host := 1; host < 255; host++ {
		if !p.used[host] {
			p.used[host] = true
			return netip.AddrFrom4([4]byte{p.base[0], p.base[1], p.base[2], byte(host)}), nil
		}
	}
	return netip.Addr{}, errPoolFull
}

// put returns a to the pool.
func (p *addrPool) put(a netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[a.As4()[3]] = false
}
