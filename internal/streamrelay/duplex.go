package streamrelay

import "io"

// HalfConn is a connection whose write side closes apart: a
// *net.TCPConn, a *net.UnixConn, a *streammux.Channel.
type HalfConn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// Duplex copies a to b and b to a until both directions end: the egress
// relay at either end of a stream (the box's bridge, the host's
// connection to the proxy). A direction whose source ends cleanly
// closes its destination's write side, so the far reader reads end of
// file and the other direction goes on; one that fails (the stream
// gone, a reset) closes both connections, which ends the other
// direction too rather than leave it waiting on a peer that cannot
// answer. The caller closes both afterwards.
func Duplex(a, b HalfConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		oneWay(b, a)
	}()
	oneWay(a, b)
	<-done
}

// oneWay copies src to dst and ends that direction.
func oneWay(dst, src HalfConn) {
	if _, err := io.Copy(dst, src); err != nil {
		// Either end may be gone already; the relay's end is all there is
		// to report, and nobody waits for it.
		_ = dst.Close()
		_ = src.Close() // as above: gone already, nobody to tell
		return
	}
	// as above: a peer gone has nothing left to be told
	_ = dst.CloseWrite()
}
