//go:build unix

package spec

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalName is the name Result.Signal uses for signal n ("SIGKILL"), or
// "" for 0.
func SignalName(n int) string {
	if n == 0 {
		return ""
	}
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}
