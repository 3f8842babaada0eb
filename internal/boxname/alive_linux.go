package boxname

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Alive reports whether a process with this pid exists in this pid
// namespace. Owners in another pid namespace that share a directory would
// look dead, so Wardens in different pid namespaces need different places.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
