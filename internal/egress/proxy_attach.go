package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Attachment is one sandbox's socket, policy, limits and audit log.
type Attachment struct {
	p       *Proxy
	sandbox string
	ln      *net.UnixListener
	dir     string
	policy  atomic.Pointer[Policy]
	log     audit

	// conns counts open client connections; used counts bytes moved.
	conns atomic.Int64
	used  atomic.Int64

	// pace paces the connections handed on (nil: not paced), and wait
	// waits for a turn (Proxy.paceWait).
	pace *rate.Limiter
	wait func(context.Context, time.Duration) error
	// atPace says the last connection accepted spent the burst; only
	// accept uses it.
	atPace bool

	// ctx ends with the attachment, cancelling resolves and dials.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	open   map[io.Closer]struct{}
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func newAttachment(p *Proxy, sandbox string, ln *net.UnixListener, dir string, pol Policy, pace Pace) *Attachment {
	a := &Attachment{p: p, sandbox: sandbox, ln: ln, dir: dir, open: map[io.Closer]struct{}{}, pace: pace.Limiter(), wait: p.paceWait}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.SetPolicy(pol)
	a.wg.Add(1)
	go a.accept()
	return a
}

// SocketPath is the socket to bind into the sandbox for its bridge.
func (a *Attachment) SocketPath() string { return filepath.Join(a.dir, socketName) }

// SetPolicy replaces the policy of a live sandbox. New requests see it at
// once; tunnels already open stay open, as a firewall keeps established
// connections. Lowering MaxBytes below what was used cuts open tunnels at
// their next read.
func (a *Attachment) SetPolicy(pol Policy) {
	pol = pol.withDefaults()
	a.policy.Store(&pol)
}

// Events returns every decision so far, in order. The log keeps the first
// 10000; past that a last event counts those not recorded.
func (a *Attachment) Events() []spec.NetworkEvent { return a.log.snapshot() }

// Close stops the listener, closes every open connection, waits for their
// events to be final and removes the socket and its directory.
func (a *Attachment) Close() error {
	a.once.Do(func() { a.err = a.shutdown() })
	return a.err
}

func (a *Attachment) shutdown() error {
	a.mu.Lock()
	a.closed = true
	a.cancel()
	err := a.ln.Close()
	for c := range a.open {
		c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	a.p.detach(a)
	return errors.Join(err, os.RemoveAll(a.dir))
}

// accept serves each connection in its own goroutine until Close. Past
// its pace it waits, with the connection it has just accepted, for that
// connection's turn: the others wait in the socket's backlog, at no cost
// to the host. A failed accept takes no turn.
func (a *Attachment) accept() {
	defer a.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := a.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: wait rather than spin, as
			// net/http's server does.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		d, spent := turn(a.pace)
		a.notePace(spent)
		if d > 0 && a.wait(a.ctx, d) != nil {
			c.Close()
			return
		}
		a.wg.Add(1)
		go a.serve(c)
	}
}

// notePace logs a paceNote when a connection spends the burst, once
// until the sandbox's connections fall below their pace again (a token
// left after a connection), so the log says why later connections hang:
// the bridge inside the sandbox paces them the same way, so a connection
// that spends this attachment's burst has spent the bridge's too.
func (a *Attachment) notePace(spent bool) {
	if spent && !a.atPace {
		a.log.add(paceNote(a.pace))
	}
	a.atPace = spent
}

// track registers c to be closed by Close; it reports false, having
// closed c, when the attachment is already closed.
func (a *Attachment) track(c io.Closer) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		c.Close()
		return false
	}
	a.open[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (a *Attachment) untrack(c io.Closer) {
	a.mu.Lock()
	delete(a.open, c)
	a.mu.Unlock()
	c.Close()
}

// take charges n bytes to the byte budget and returns how many of them
// may be moved; fewer than n means the limit is reached.
func (a *Attachment) take(n int) int {
	max := a.policy.Load().MaxBytes
	used := a.used.Add(int64(n))
	if used <= max {
		return n
	}
	over := min(used-max, int64(n))
	a.used.Add(-over)
	return n - int(over)
}

// budgetLeft reports whether any byte may still be moved.
func (a *Attachment) budgetLeft() bool {
	return a.used.Load() < a.policy.Load().MaxBytes
}
