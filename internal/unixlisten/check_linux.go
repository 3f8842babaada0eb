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
	if err := rc.Control(func(fd uintptr) { cerr = checkFD(int(fd)) }); err != nil {
		return fmt.Errorf("descriptor %s: %w", f.Name(), err)
	}
	return cerr
}

// checkFD is Check on a raw descriptor.
func checkFD(fd int) error {
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
		return fmt.Errorf("descriptor %d is a socket of family %s, type %s, not a unix stream socket: pass a listening unix stream socket and relay TCP into it", fd, familyName(domain), typeName(typ))
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

// familyName is a socket family's name, for a refusal.
func familyName(f int) string {
	switch f {
	case unix.AF_UNIX:
		return "AF_UNIX"
	case unix.AF_INET:
		return "AF_INET"
	case unix.AF_INET6:
		return "AF_INET6"
	case unix.AF_NETLINK:
		return "AF_NETLINK"
	case unix.AF_PACKET:
		return "AF_PACKET"
	case unix.AF_VSOCK:
		return "AF_VSOCK"
	}
	return fmt.Sprintf("%d", f)
}

// typeName is a socket type's name, for a refusal.
func typeName(t int) string {
	switch t {
	case unix.SOCK_STREAM:
		return "SOCK_STREAM"
	case unix.SOCK_DGRAM:
		return "SOCK_DGRAM"
	case unix.SOCK_SEQPACKET:
		return "SOCK_SEQPACKET"
	case unix.SOCK_RAW:
		return "SOCK_RAW"
	}
	return fmt.Sprintf("%d", t)
}
