package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/streamrelay"
)

// The box's side of egress over the stream: channels it opens, each a
// connection of its bridge, relayed to its proxy.

// serveGuestChannels takes the channels the box opens: each is one
// connection of its egress bridge, which the host connects to the box's
// egress proxy. A box without the proxy, or whose bridge reaches it
// otherwise (Frame.EgressChannels unset), has no business opening one,
// so that is a breach. streammux bounds how many the box has open at once.
func (s *Session) serveGuestChannels() {
	for {
		ch, err := s.mux.Accept(context.Background())
		if err != nil {
			return // the stream ended: readStreamEvents reports why
		}
		if s.f.Egress == nil || !s.f.EgressChannels {
			s.breach(fmt.Errorf("%w: it opened stream channel %d, and only a boxed init's egress bridge may; only the host opens channels here", nsinit.ErrProtocol, ch.ID()))
			// the stream ends with the box
			_ = ch.Close()
			return
		}
		go relayEgress(ch, s.f.Egress.SocketPath())
	}
}

// relayEgress connects ch, a connection of the box's egress bridge, to
// its proxy socket and copies both ways until both directions end.
func relayEgress(ch *streammux.Channel, socket string) {
	defer ch.Close()
	c, err := net.DialTimeout("unix", socket, egressDialTimeout)
	if err != nil {
		return // the box's client sees its connection close
	}
	p := c.(*net.UnixConn)
	defer p.Close()
	streamrelay.Duplex(ch, p)
}

// egressDialTimeout bounds reaching the proxy's socket, on this host.
const egressDialTimeout = 10 * time.Second
