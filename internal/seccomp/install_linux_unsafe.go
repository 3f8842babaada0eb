//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InstallOnThread loads the filter on the calling OS thread only. It does not
// use SECCOMP_FILTER_FLAG_TSYNC: the sandbox init keeps its other threads
// unfiltered and confines only the thread that forks and execs the user's
// program, which then inherits the filter together with all its descendants.
//
// The caller must already have locked the goroutine to its thread
// (runtime.LockOSThread) and set no_new_privs (PR_SET_NO_NEW_PRIVS); without
// the latter an unprivileged caller gets EACCES. Once loaded, a filter cannot
// be removed from the thread.
//
// Go's os/exec keeps working from the filtered thread because it forks with
// clone. It switches to clone3, which the filter answers with ENOSYS and Go
// does not retry, only for SysProcAttr.UseCgroupFD or CLONE_NEWTIME: start
// the user's program without those.
//
// It installs the precompiled program (zprogram_linux.go) as it is: no
// policy is resolved or assembled at run time.
func InstallOnThread() error {
	if err := checkArch(); err != nil {
		return err
	}
	// The kernel copies the program; program itself is never written.
	fprog := unix.SockFprog{Len: uint16(len(program)), Filter: &program[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno == 0:
		return nil
	case errors.Is(errno, unix.EACCES):
		return fmt.Errorf("installing seccomp filter (is no_new_privs set?): %w", errno)
	default:
		return fmt.Errorf("installing seccomp filter: %w", errno)
	}
}
