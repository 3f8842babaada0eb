//go:build linux

package nsinit

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// capsetAllThreads sets the permitted and effective capabilities of every
// thread of the init to caps, and the inheritable set to nothing: threads
// other than the one lockdown locks down keep what the runtime gave the
// init otherwise. It needs a binary built without cgo, as warden's are.
func capsetAllThreads(caps []uintptr) error {
	hdr, data := capSets(caps)
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if e != 0 {
		return fmt.Errorf("capset on every thread: %w", e)
	}
	return nil
}
