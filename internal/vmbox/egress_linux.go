package vmbox

// The VM has no network device at all, whatever --net says: its guest
// kernel has only lo. With --net proxy the boxed agent's egress bridge
// listens on the guest's lo (agent.EgressPort, the HTTP(S)_PROXY the
// box's programs are given) and opens a stream channel on the agent port
// per connection; the session (agent.Frame.EgressChannels) relays each to
// the box's own socket on this process's egress proxy, the one the
// gVisor and Docker backends use, so its rules, audit events, live rule
// changes and connection pace are theirs. Without the proxy the box has
// no way out, and a channel it opens is a breach that ends the session.

// closeEgress closes the box's proxy socket, once its VM is gone: the
// connections still open end, and their audit events are final.
func (b *box) closeEgress() {
	if b.att == nil {
		return
	}
	if err := b.att.Close(); err != nil {
		b.logger().Warn("closing the box's egress proxy socket", "err", err)
	}
}
