// Package connlimit caps the connections an HTTP server holds, so that
// clients, authenticated or not, can never take the file descriptors the
// server's sandboxes need: each session holds several in the server (its
// control socket, an exec's pipes, its workspace directory, cgroup files,
// its egress proxy's sockets), and a failure to open one fails a tenant's
// work.
//
// At the cap a new connection evicts one that nobody has vouched for:
// first one still sending its request's headers (http.StateNew) or whose
// request has not passed authentication (see Authenticated), then an idle
// keep-alive connection (http.StateIdle); never one whose request passed
// authentication and is being served. It evicts one from its own host
// (IPv4 address or IPv6 /64) if that host has any, else the longest
// waiting of all. So a flood of half-open, idle or unauthenticated
// connections costs its own connections, not other clients' requests,
// and a tenant's request that has reached a handler runs to its end. A
// tenant protects at most the cap divided by the number of tenants at
// once, so no key can make every connection unevictable. When every
// connection is protected the new one is answered 503 and closed.
//
// Unprotected connections have a cap of their own, which may be below
// the cap on all of them: when the descriptor limit cannot keep the
// sandboxes' whole reserve, tenants' requests may still hold one
// connection per sandbox, but strangers only what the limit leaves
// beside the whole reserve; a new connection past that cap evicts an
// unprotected one in the same order.
package connlimit

import (
	"container/list"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener is a net.Listener that holds at most max connections. Serve
// an http.Server with it through its Serve method, which lets it follow
// the server's view of each connection. It is safe for concurrent use.
type Listener struct {
	net.Listener
	max int
	// maxSpare is how many of them may be unprotected (pending or idle)
	// at once: the connections anyone may hold without a key, which
	// the sandboxes' reserve leaves room for even when max does not.
	maxSpare int
	// perTenant is how many connections one tenant's requests may
	// protect at once: max divided among the tenants.
	perTenant int
	log       *slog.Logger

	mu        sync.Mutex
	open      int // connections accepted and not yet closed
	spare     spares
	protected map[string]int // by tenant, connections Authenticated protects now
	stats     Stats
	// Evictions and refusals since the last log line, which is written at
	// most once a second so a flood cannot flood the log.
	evicted, refused int
	logged           time.Time
}

// Stats count what a Listener did since it was made.
type Stats struct {
	Open     int    // connections held now
	Max      int    // connections held at most
	MaxSpare int    // unprotected connections (pending or idle) held at most
	Accepted uint64 // connections accepted from the kernel
	Evicted  uint64 // unprotected connections closed to make room
	Refused  uint64 // new connections closed because every other one was protected
}

// Stats says what l holds and has done.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.Open, st.Max, st.MaxSpare = l.open, l.max, l.maxSpare
	return st
}

// newListener wraps ln so that it holds at most c.conns connections (at
// least one), at most c.spare of them unprotected (at least one), of
// which each of tenants (at least one) may protect an even share.
func newListener(ln net.Listener, c caps, tenants int, log *slog.Logger) *Listener {
	n := max(c.conns, 1)
	return &Listener{Listener: ln, max: n, maxSpare: min(max(c.spare, 1), n), perTenant: max(n/max(tenants, 1), 1),
		log: log, protected: map[string]int{}}
}

// Serve serves hs on l until l is closed, as hs.Serve(l) does, with hs's
// ConnState and ConnContext chained to l's own, without which l would
// take every connection for one waiting for its headers and evict it.
func (l *Listener) Serve(hs *http.Server) error {
	state, connCtx := hs.ConnState, hs.ConnContext
	hs.ConnState = func(nc net.Conn, s http.ConnState) {
		l.connState(nc, s)
		if state != nil {
			state(nc, s)
		}
	}
	hs.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		if connCtx != nil {
			ctx = connCtx(ctx, nc)
		}
		if c, ok := nc.(*conn); ok {
			ctx = context.WithValue(ctx, connKey{}, c)
		}
		return ctx
	}
	return hs.Serve(l)
}

type connKey struct{}

// Authenticated protects the connection of the request whose context is
// ctx from eviction until its request ends: call it once the request has
// shown tenant's valid key. Until then a stranger's busy connection
// (pipelined requests, a body it never sends) may be evicted like an idle
// one. A tenant protects at most its share of the cap at once (the cap
// divided by the number of tenants); its requests past that stay
// evictable, so one key cannot make every connection unevictable. A
// context that did not come from Serve is ignored.
func Authenticated(ctx context.Context, tenant string) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || c.protectedBy != nil || l.protected[tenant] >= l.perTenant {
		return
	}
	l.spare.remove(c)
	l.protected[tenant]++
	c.protectedBy = &tenant
}

// unprotectLocked ends c's protection, when its request is over.
func (l *Listener) unprotectLocked(c *conn) {
	if c.protectedBy == nil {
		return
	}
	if t := *c.protectedBy; l.protected[t] <= 1 {
		delete(l.protected, t)
	} else {
		l.protected[t]--
	}
	c.protectedBy = nil
}

// Accept waits for the next connection, making room for it when l is
// full, or holds as many unprotected connections as it may, by evicting
// an unprotected connection: the longest waiting of the same host's,
// else of all. A connection that finds every other one
// protected is answered 503 and closed, and the next one awaited.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
	}
}

// admit tracks nc, or answers it 503, closes it and returns nil when
// there is no room.
func (l *Listener) admit(nc net.Conn) *conn {
	peer := peerOf(nc.RemoteAddr())
	l.mu.Lock()
	l.stats.Accepted++
	var victim *conn
	if l.open >= l.max || l.spare.len() >= l.maxSpare {
		if victim = l.spare.victim(peer); victim != nil {
			l.forgetLocked(victim)
			l.evicted++
			l.stats.Evicted++
		} else {
			l.refused++
			l.stats.Refused++
		}
	}
	var c *conn
	if l.open < l.max {
		c = &conn{Conn: nc, l: l, peer: peer}
		l.spare.add(c, pending)
		l.open++
	}
	report := l.reportLocked()
	l.mu.Unlock()
	if victim != nil {
		l.closeQuietly(victim.Conn, "evicted")
	}
	if c == nil {
		l.refuse(nc)
	}
	report()
	return c
}

// refusal is the whole answer to a connection over the cap: one short
// write into a fresh socket's empty buffer, so it never blocks the
// accept loop, and a client learns why rather than seeing a reset.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\nContent-Length: 54\r\n\r\nserver busy: too many connections in use; retry later\n"

// refuse answers nc 503 and closes it.
func (l *Listener) refuse(nc net.Conn) {
	if err := nc.SetWriteDeadline(time.Now().Add(time.Second)); err == nil {
		_, _ = io.WriteString(nc, refusal) // the peer may be gone; it is closed either way
	}
	l.closeQuietly(nc, "refused")
}

// connState follows the http.Server's view of each connection: one
// sending its request joins the pending queue (its request has yet to
// pass authentication), an idle one the idle queue, a closed one is
// forgotten.
func (l *Listener) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	l.unprotectLocked(c)
	switch state {
	case http.StateNew, http.StateActive:
		l.spare.add(c, pending)
	case http.StateIdle:
		l.spare.add(c, idle)
	case http.StateHijacked:
		l.spare.remove(c)
	case http.StateClosed:
		l.forgetLocked(c)
	}
}

// forgetLocked stops tracking c, which frees its place for another.
func (l *Listener) forgetLocked(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	l.spare.remove(c)
	l.unprotectLocked(c)
	l.open--
}

// reportLocked takes the evictions and refusals to log, at most once a
// second, and returns the func that logs them once l.mu is released.
func (l *Listener) reportLocked() func() {
	now := time.Now()
	if l.evicted+l.refused == 0 || now.Sub(l.logged) < time.Second {
		return func() {}
	}
	evicted, refused := l.evicted, l.refused
	l.evicted, l.refused, l.logged = 0, 0, now
	return func() {
		l.log.Warn("connection limit reached: closed connections no tenant's request was using, and new ones when every connection was",
			"evicted", evicted, "refused", refused, "max_connections", l.max)
	}
}

// closeQuietly closes a connection l gave up; its error is worth a debug
// line at most, as the peer is gone either way.
func (l *Listener) closeQuietly(nc net.Conn, why string) {
	if err := nc.Close(); err != nil {
		l.log.Debug("closing a connection over the limit", "why", why, "err", err)
	}
}

// conn is an accepted connection as the listener tracks it. Its fields
// are guarded by the listener's mutex.
type conn struct {
	net.Conn
	l    *Listener
	peer string // peerOf its remote address
	// Its queue and places in l.spare while it is unprotected.
	class         class
	inAll, inPeer *list.Element
	closed        bool
	protectedBy   *string // the tenant whose request protects it, if one does
}

// Close frees the connection's place and closes it.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// ReadFrom lets the server hand a file to the kernel (sendfile) when the
// connection can, as it could without the wrapper.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite half-closes the connection when it can, which net/http does
// before closing one whose request body it did not read.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
