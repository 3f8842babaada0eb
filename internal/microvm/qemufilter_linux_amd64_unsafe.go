//go:build linux && amd64

package microvm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// confineThread sets no_new_privs and installs Warden's filter for QEMU
// (qemuFilter) on the calling thread, locked to its goroutine and never
// given back to the runtime: QEMU, forked from it, inherits both, before
// its exec, and no process can lift them. The kernel logs a kill (another
// ABI); refusals are not logged (no SECCOMP_FILTER_FLAG_LOG): QEMU 7.2
// itself tries io_uring_setup and clone3 on every start, and falls back,
// which would log three lines per VM.
func confineThread() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("microvm: setting no_new_privs for QEMU: %w", err)
	}
	prog := qemuFilter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("microvm: installing QEMU's seccomp filter: %w", errno)
	}
	return nil
}
