package unixlisten

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Check says whether f is a listening AF_UNIX stream socket, and if not,
// what it is instead, in one line, so that a descriptor handed in by
// mistake or on purpose (a terminal, a file, a TCP socket of the host's
// network, a datagram socket) is refused before the sandbox starts.
func Check(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("descriptor %s: %w", f.Name(), err)
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = CheckFD(int(fd)) }); err != nil {
		return fmt.Errorf("descriptor %s: %w", f.Name(), err)
	}
	return cerr
}

// CheckFD is Check on a raw descriptor.
func CheckFD(fd int) error {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if errors.Is(err, unix.ENOTSOCK) {
		return fmt.Errorf("descriptor %d is not a socket: pass a listening unix stream socket", fd)
	}
	if err != nil {
		return fmt.Errorf("descriptor %d: reading its socket family: %w (pass a listening unix stream socket)", fd, err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("descriptor %d: reading its socket type: %w (pass a listening unix stream socket)", fd, err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return fmt.Errorf("descriptor %d is a socket of family %d, type %d, not a unix stream socket: pass a listening unix stream socket and relay TCP into it", fd, domain, typ)
	}
	listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("descriptor %d: reading whether it listens: %w (pass a listening unix stream socket)", fd, err)
	}
	if listening == 0 {
		return fmt.Errorf("descriptor %d is a unix stream socket that does not listen: pass one after listen(2)", fd)
	}
	return nil
}
