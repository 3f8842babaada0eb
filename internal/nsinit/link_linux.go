package nsinit

import (
	"errors"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streamrelay"
)

// egressLink is a boxed init's way to the egress proxy: a connection to
// the host, on which each request (one byte) is answered with one byte
// carrying a fresh connection to the sandbox's proxy socket. Requests are
// answered in order, so one is in flight at a time.
type egressLink struct {
	mu sync.Mutex
	fd int
}

// linkRequest is the byte that asks the host for a proxy connection.
const linkRequest = 'c'

func (l *egressLink) dial() (egressConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := unix.Write(l.fd, []byte{linkRequest}); err != nil {
		return nil, err
	}
	fds, err := receiveFDs(l.fd)
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		closeAll(fds)
		return nil, errors.New("the host sent no proxy connection")
	}
	f := os.NewFile(uintptr(fds[0]), "egress")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("the host's proxy connection is not a unix socket")
	}
	return uc, nil
}

// relay copies bytes both ways between c and the proxy connection p until
// both directions end: the box's sockets cannot be handed to the host.
// c is the bridge's accepted TCP connection.
func relay(c net.Conn, p egressConn) {
	if hc, ok := c.(streamrelay.HalfConn); ok {
		streamrelay.Duplex(hc, p)
	}
}
