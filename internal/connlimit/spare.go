package connlimit

import (
	"container/list"
	"net"
)

// class orders the unprotected connections for eviction.
type class int

const (
	// pending connections are sending a request nobody vouched for yet:
	// its headers, or a request that has not passed authentication.
	pending class = iota
	// idle connections are keep-alive ones between requests, which a
	// tenant's next request may be arriving on; they go after pending ones.
	idle
	classes
)

// queue is one class of spare connections in the order they joined it:
// all of them, and those of each peer apart.
type queue struct {
	all    list.List
	byPeer map[string]*list.List
}

// spares are the connections that may be evicted, by class.
type spares [classes]queue

// add puts c at the end of class k's queues, as the one that waited least.
func (s *spares) add(c *conn, k class) {
	s.remove(c)
	q := &s[k]
	if q.byPeer == nil {
		q.byPeer = map[string]*list.List{}
	}
	pq := q.byPeer[c.peer]
	if pq == nil {
		pq = list.New()
		q.byPeer[c.peer] = pq
	}
	c.class, c.inAll, c.inPeer = k, q.all.PushBack(c), pq.PushBack(c)
}

// remove takes c out of the queues, if it is in them.
func (s *spares) remove(c *conn) {
	if c.inAll == nil {
		return
	}
	q := &s[c.class]
	q.all.Remove(c.inAll)
	pq := q.byPeer[c.peer]
	pq.Remove(c.inPeer)
	if pq.Len() == 0 {
		delete(q.byPeer, c.peer)
	}
	c.inAll, c.inPeer = nil, nil
}

// len is how many connections may be evicted.
func (s *spares) len() int {
	n := 0
	for k := range classes {
		n += s[k].all.Len()
	}
	return n
}

// victim is the connection a new one from peer evicts: the longest
// waiting of peer's own, pending before idle, else the longest waiting
// of all, pending before idle; nil when every connection is protected. A
// peer that floods the server with connections thus evicts its own, and
// only a peer without spare ones takes another peer's place.
func (s *spares) victim(peer string) *conn {
	for k := range classes {
		if pq := s[k].byPeer[peer]; pq != nil {
			return pq.Front().Value.(*conn)
		}
	}
	for k := range classes {
		if front := s[k].all.Front(); front != nil {
			return front.Value.(*conn)
		}
	}
	return nil
}

// peerOf names the host a connection comes from: its IPv4 address, or
// the /64 network of its IPv6 address, since one host commonly holds a
// whole /64. A connection without an address (which a listener should
// never give) is put with every other such one.
func peerOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String()
}
