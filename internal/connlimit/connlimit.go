// Package connlimit caps the connections an HTTP server holds, so that
// clients, authenticated or not, can never take the file descriptors the
// server's sandboxes need: each session holds several in the server (its
// control socket, an exec's pipes, its workspace directory, cgroup files,
// its egress proxy's sockets), and a failure to open one fails a tenant's
// work.
//
// At the cap a new connection evicts one that has waited longest without
// a request in flight: one still sending its first request's headers
// (http.StateNew) or an idle keep-alive connection (http.StateIdle),
// never one whose request is being served (http.StateActive). It evicts
// one from its own host (IPv4 address or IPv6 /64) if that host has any,
// else the longest waiting of all. So a flood of half-open or idle
// connections costs its own connections, not other clients' requests,
// and a request that has reached a handler runs to its end. When every
// connection is active the new one is closed at once.
package connlimit

import (
	"container/list"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener is a net.Listener that holds at most max connections; set its
// ConnState as the http.Server's ConnState so it knows which connections
// have a request in flight. It is safe for concurrent use.
type Listener struct {
	net.Listener
	max int
	log *slog.Logger

	mu    sync.Mutex
	open  int // connections accepted and not yet closed
	spare spares
	stats Stats
	// Evictions and refusals since the last log line, which is written at
	// most once a second so a flood cannot flood the log.
	evicted, refused int
	logged           time.Time
}

// Stats count what a Listener did since it was made.
type Stats struct {
	Open     int    // connections held now
	Accepted uint64 // connections accepted from the kernel
	Evicted  uint64 // connections without a request in flight closed to make room
	Refused  uint64 // new connections closed because every other one was busy
}

// Stats says what l holds and has done.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.Open = l.open
	return st
}

// New wraps ln so that it holds at most n connections (at least one).
func New(ln net.Listener, n int, log *slog.Logger) *Listener {
	return &Listener{Listener: ln, max: max(n, 1), log: log}
}

// Max is the number of connections l holds at most.
func (l *Listener) Max() int { return l.max }

// Accept waits for the next connection, making room for it when l is
// full by evicting a connection without a request in flight: the longest
// waiting of the same host's, else of all. A connection that finds every other one active is closed at once
// and the next one awaited.
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

// admit tracks nc, or closes it and returns nil when there is no room.
func (l *Listener) admit(nc net.Conn) *conn {
	l.mu.Lock()
	l.stats.Accepted++
	var victim *conn
	if l.open >= l.max {
		if victim = l.spare.victim(peerOf(nc.RemoteAddr())); victim != nil {
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
		c = &conn{Conn: nc, l: l, peer: peerOf(nc.RemoteAddr())}
		l.spare.add(c)
		l.open++
	}
	report := l.reportLocked()
	l.mu.Unlock()
	if victim != nil {
		l.closeQuietly(victim.Conn, "evicted")
	}
	if c == nil {
		l.closeQuietly(nc, "refused")
	}
	report()
	return c
}

// ConnState follows the http.Server's view of each connection: one
// without a request in flight joins the end of the eviction queue, one
// whose request is being served leaves it.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	switch state {
	case http.StateNew, http.StateIdle:
		l.spare.add(c)
	case http.StateActive, http.StateHijacked:
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
		l.log.Warn("connection limit reached: closed connections that had no request in flight, and new ones when every connection was busy",
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
	// Its places in l.spare while no request is in flight.
	inAll, inPeer *list.Element
	closed        bool
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
