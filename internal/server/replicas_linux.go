package server

import (
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds on a dead holder's connection: the kernel probes an idle one
// after holderKeepIdle, every holderKeepInterval, and gives up after
// holderKeepCount unanswered probes (about 35 s); data it sent that the
// holder does not acknowledge within holderUserTimeout fails the
// connection too. A holder whose node or network is gone thus fails a
// forward within about a minute, however long its exec may run.
const (
	holderKeepIdle     = 15 * time.Second
	holderKeepInterval = 5 * time.Second
	holderKeepCount    = 4
	holderUserTimeout  = 30 * time.Second
)

// keepHolder sets the bounds on a dead peer on c, a connection to a
// holder.
func keepHolder(c net.Conn) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return errors.New("not a TCP connection")
	}
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: holderKeepIdle, Interval: holderKeepInterval, Count: holderKeepCount}); err != nil {
		return err
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(holderUserTimeout/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}
