package egress

import (
	"errors"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox's bridge hands each TCP connection it accepts on the
// sandbox's loopback to the proxy itself, as a descriptor attached to one
// NUL byte, rather than copying its bytes over the unix socket: the proxy
// then reads and writes the sandbox's socket directly, which saves a hop
// and lets the kernel splice between the two TCP connections. A client
// that speaks HTTP on the unix socket itself is served as before (an
// HTTP request never starts with NUL).

// handoffMarker is the byte a descriptor travels with.
const handoffMarker = 0

// clientConn is what the proxy serves: the unix connection, or the
// sandbox's TCP connection handed over on it.
type clientConn interface {
	net.Conn
	CloseWrite() error
}

// handoffTimeout bounds the wait for a connection's first byte.
const handoffTimeout = 10 * time.Second

// errLostHandOff is a hand-off whose descriptor the kernel dropped
// (MSG_CTRUNC) because this process was at its RLIMIT_NOFILE: the
// sandbox did nothing wrong, and its connection is lost.
var errLostHandOff = errors.New("the server is out of file descriptors: a connection the sandbox opened was lost on its way to the proxy; retry it")

// receive takes the first message on c: a handed-over TCP connection
// (c is then closed), or the start of an HTTP request, returned to be
// read first.
func receive(c *net.UnixConn) (clientConn, []byte, error) {
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	// A deadline fails only on a closed connection, which the read reports.
	_ = c.SetReadDeadline(time.Now().Add(handoffTimeout))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	_ = c.SetReadDeadline(time.Time{}) // fails only on a closed connection
	if err != nil {
		return nil, nil, err
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return nil, nil, err
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeFDs(fds)
		return nil, nil, errLostHandOff
	}
	if len(fds) == 0 {
		return c, buf[:n], nil
	}
	closeFDs(fds[1:])
	if n != 1 || buf[0] != handoffMarker {
		unix.Close(fds[0])
		return nil, nil, errors.New("a descriptor came without the hand-off marker")
	}
	tc, err := tcpFromFD(fds[0])
	if err != nil {
		return nil, nil, err
	}
	c.Close()
	return tc, nil, nil
}

// tcpFromFD wraps a handed-over descriptor, which must be a TCP socket.
func tcpFromFD(fd int) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(fd), "sandbox connection")
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, errors.New("the handed-over descriptor is not a TCP connection")
	}
	return tc, nil
}

func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		r, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return nil, err
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
