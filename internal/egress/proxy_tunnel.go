package egress

import (
	"errors"
	"io"
	"net"
	"sync"
)

// tunnel answers a CONNECT and copies bytes both ways until both sides
// are done. An EOF is passed on as a half close, so protocols that
// shut down their sending side keep working; an error or the byte limit
// closes both connections. It returns a note for the audit when the
// tunnel ended abnormally.
func (x *exchange) tunnel(up net.Conn, m *meters) string {
	if _, err := io.WriteString(x.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return "the client went away"
	}
	var wg sync.WaitGroup
	var upErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		// x.br holds whatever the client sent after its header; once it
		// is empty the client's own socket may be read directly.
		var src io.Reader = x.br
		if x.br.Buffered() == 0 && len(x.first) == 0 {
			src = x.c
		}
		upErr = x.a.copy(up, src, &m.up)
		x.endDirection(up, upErr, up)
	}()
	downErr := x.a.copy(x.c, up, &m.down)
	x.endDirection(x.c, downErr, up)
	wg.Wait()
	if errors.Is(upErr, errByteLimit) || errors.Is(downErr, errByteLimit) {
		return "closed at the byte limit"
	}
	return ""
}

// endDirection finishes one direction of a tunnel: a clean EOF becomes a
// half close of dst, anything else closes both sides, which also ends the
// other direction.
func (x *exchange) endDirection(dst net.Conn, err error, up net.Conn) {
	if err == nil {
		if hc, ok := dst.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
			return
		}
	}
	x.c.Close()
	up.Close()
}
