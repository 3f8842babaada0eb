package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// ShutdownControl shuts a box's control connection down both ways, which
// makes its agent, PID 1, exit. It goes through f's own reference to its
// descriptor: the session may close f at the same moment, and the bare
// number os.File.Fd hands out could by then belong to another file, such
// as another session's control connection. A closed f is left alone,
// with os.ErrClosed.
func ShutdownControl(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_RDWR) }); err != nil {
		return os.ErrClosed // Control fails only once f is closed (or closing)
	}
	return serr
}
