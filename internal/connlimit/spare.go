package connlimit

import (
	"container/list"
	"net"
)

// spares are the connections without a request in flight, the ones that
// may be evicted, in the order they began to wait: all of them, and those
// of each peer apart, so a peer's new connection can evict its own.
type spares struct {
	all    list.List
	byPeer map[string]*list.List
}

// add puts c at the end of the queues, as the one that waited least.
func (s *spares) add(c *conn) {
	s.remove(c)
	if s.byPeer == nil {
		s.byPeer = map[string]*list.List{}
	}
	q := s.byPeer[c.peer]
	if q == nil {
		q = list.New()
		s.byPeer[c.peer] = q
	}
	c.inAll, c.inPeer = s.all.PushBack(c), q.PushBack(c)
}

// remove takes c out of the queues, if it is in them.
func (s *spares) remove(c *conn) {
	if c.inAll == nil {
		return
	}
	s.all.Remove(c.inAll)
	q := s.byPeer[c.peer]
	q.Remove(c.inPeer)
	if q.Len() == 0 {
		delete(s.byPeer, c.peer)
	}
	c.inAll, c.inPeer = nil, nil
}

// victim is the connection a new one from peer evicts: the longest
// waiting of peer's own, else the longest waiting of all; nil when every
// connection has a request in flight. A peer that floods the server with
// connections thus evicts its own, and only a peer without spare ones
// takes another peer's place.
func (s *spares) victim(peer string) *conn {
	if q := s.byPeer[peer]; q != nil {
		return q.Front().Value.(*conn)
	}
	if front := s.all.Front(); front != nil {
		return front.Value.(*conn)
	}
	return nil
}

func (s *spares) len() int { return s.all.Len() }

// peerOf names the host a connection comes from: its IPv4 address, or
// the /64 network of its IPv6 address, since one host commonly holds a
// whole /64.
func peerOf(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String()
}
