package streamrelay

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NonblockingCopy is a close-on-exec, non-blocking copy of fd as an
// *os.File, which the runtime's poller serves: its Close ends a pending
// Read or Write, as a relay and streammux.New need. O_NONBLOCK belongs
// to the open file description, which fd and its copy share, so fd is
// non-blocking afterwards too: every caller's fd is one it hands to the
// copy's relay and reads or writes no more itself.
func NonblockingCopy(fd uintptr, name string) (*os.File, error) {
	dup, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("copying %s: %w", name, err)
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		// a copy nobody used
		_ = unix.Close(dup)
		return nil, fmt.Errorf("making %s non-blocking: %w", name, err)
	}
	return os.NewFile(uintptr(dup), name), nil
}

// FileCopy is NonblockingCopy of f's descriptor.
func FileCopy(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("copying %s: %w", name, err)
	}
	var c *os.File
	var cerr error
	if err := rc.Control(func(fd uintptr) { c, cerr = NonblockingCopy(fd, name) }); err != nil {
		return nil, fmt.Errorf("copying %s: %w", name, err)
	}
	return c, cerr
}
