package kubebed

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/podinit"
)

// Figures of a Pod's relay: at most maxRelayed connections at once (the
// init serves one session at a time; routers waiting for it queue), a
// connection to the box's listener must succeed within relayDial, and
// refusals at the bound are logged at most once a refusalLogEvery.
const (
	maxRelayed      = 16
	relayDial       = 5 * time.Second
	refusalLogEvery = 10 * time.Second
)

// relay accepts TCP on a Pod's address in the host's network namespace
// and carries each connection over a connection of its own to a unix
// stream listener handed to the Pod's boxed program, so that no socket
// of the host's network enters the box (unixlisten's doc says why).
// The unix listener has an abstract address of the host's network
// namespace, which the box's own processes, in a network namespace of
// their own, cannot reach.
type relay struct {
	tcp   *net.TCPListener
	addr  string
	slots chan struct{}
	// linger is how long a client may still send once the box's side
	// of its connection ended (podinit.HandshakeTimeout): a silent
	// client would otherwise hold its slot for good.
	linger time.Duration

	// refused counts refusals at the bound since lastLog (the accept
	// goroutine's alone).
	refused int
	lastLog time.Time

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newRelay listens on ap and on a new abstract unix address, and returns
// the relay, not yet serving, and a copy of the unix listener for the
// program (the caller closes it once handed over).
func newRelay(ap netip.AddrPort) (*relay, *os.File, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, fmt.Errorf("naming the relay's unix listener: %w", err)
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@warden-kubebed-" + hex.EncodeToString(b[:]), Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listening on a unix address for the Pod's program: %w", err)
	}
	f, err := ul.File()
	// File made a copy, which the program takes; abstract, so closing
	// this one leaves the address to that copy
	if cerr := ul.Close(); cerr != nil {
		log.Printf("kubebed kubelet: closing the relay's unix listener after copying it: %v", cerr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("copying the relay's unix listener: %w", err)
	}
	tl, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
	if err != nil {
		closeLogged(f, "the relay's unix listener")
		return nil, nil, fmt.Errorf("listening on %s for the Pod's program: %w", ap, err)
	}
	r := &relay{tcp: tl, addr: ul.Addr().String(), slots: make(chan struct{}, maxRelayed), linger: podinit.HandshakeTimeout, conns: map[net.Conn]struct{}{}}
	return r, f, nil
}

// serve accepts and relays in a goroutine of its own until close.
func (r *relay) serve() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			tc, err := r.tcp.AcceptTCP()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					log.Printf("kubebed kubelet: relay on %s: accepting: %v", r.tcp.Addr(), err)
				}
				return
			}
			select {
			case r.slots <- struct{}{}:
			default:
				r.refuse(tc)
				continue
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer func() { <-r.slots }()
				r.pipe(tc)
			}()
		}
	}()
}

// refuse closes tc, a connection over the bound, logging the refusals
// at most once a refusalLogEvery: a connect flood must not grow the
// kubelet's log without limit.
func (r *relay) refuse(tc *net.TCPConn) {
	r.refused++
	if now := time.Now(); now.Sub(r.lastLog) >= refusalLogEvery {
		log.Printf("kubebed kubelet: relay on %s: %d connections already; closed %d over the bound, the latest from %s", r.tcp.Addr(), maxRelayed, r.refused, tc.RemoteAddr())
		r.refused, r.lastLog = 0, now
	}
	closeLogged(tc, "a connection over the relay's bound")
}

// pipe carries tc to a new connection to the box's listener and back,
// each direction closed for writing when its source ends; once the
// box's side ended, tc may send for linger more, so that a silent client
// cannot keep the slot; both closed once both ended, on an error, or
// when the relay closes.
func (r *relay) pipe(tc *net.TCPConn) {
	if !r.track(tc) {
		return
	}
	defer r.untrack(tc)
	if err := podinit.KeepAlive(tc); err != nil {
		log.Printf("kubebed kubelet: relay: keepalive on %s: %v", tc.RemoteAddr(), err)
	}
	c, err := net.DialTimeout("unix", r.addr, relayDial)
	if err != nil {
		log.Printf("kubebed kubelet: relay on %s: reaching the Pod's program for %s: %v", r.tcp.Addr(), tc.RemoteAddr(), err)
		return
	}
	uc := c.(*net.UnixConn)
	if !r.track(uc) {
		return
	}
	defer r.untrack(uc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		half(uc, tc)
	}()
	half(tc, uc)
	if err := tc.SetReadDeadline(time.Now().Add(r.linger)); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Printf("kubebed kubelet: relay: bounding %s's last words: %v", tc.RemoteAddr(), err)
	}
	<-done
}

// halfConn is a connection that can be closed for writing alone.
type halfConn interface {
	net.Conn
	CloseWrite() error
}

// half copies src to dst (io.Copy's bounded buffer or splice) until src
// ends, then closes dst for writing; on an error other than src's end
// (a deadline pipe set included) it closes both, which ends the other
// direction too.
func half(dst, src halfConn) {
	if _, err := io.Copy(dst, src); err != nil {
		closeLogged(dst, "a relayed connection")
		closeLogged(src, "a relayed connection")
		return
	}
	// ENOTCONN: the peer has gone already, so there is nothing to close
	if err := dst.CloseWrite(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ENOTCONN) {
		log.Printf("kubebed kubelet: relay: closing a direction: %v", err)
	}
}

// track records c to be closed by close; false (and c closed) once the
// relay is closed.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		closeLogged(c, "a relayed connection")
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	closeLogged(c, "a relayed connection")
}

// close stops accepting, closes every relayed connection, and waits for
// the relay's goroutines.
func (r *relay) close() {
	closeLogged(r.tcp, "the relay's TCP listener")
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		closeLogged(c, "a relayed connection")
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// closeLogged closes c, logging a failure other than its being closed
// already.
func closeLogged(c io.Closer, what string) {
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
		log.Printf("kubebed kubelet: closing %s: %v", what, err)
	}
}
