//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InstallOnThread loads the filter that lets the kernel answer every
// allowed syscall (program) on the calling OS thread only: the one for
// gVisor boxes, whose kernel answers sysinfo(2) with the box's own
// figures. It does not use SECCOMP_FILTER_FLAG_TSYNC: the sandbox init
// keeps its other threads unfiltered and confines only the thread that
// forks and execs the user's program, which then inherits the filter
// together with all its descendants.
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
	_, err := install(program[:], 0)
	return err
}

// InstallNotifying is InstallOnThread with the filter for boxes whose
// kernel is the host's (programNotifying): the syscalls the init answers
// itself (sysinfo) wait for an answer on the listener it returns, a
// close-on-exec descriptor that the caller must serve for as long as any
// filtered process lives (a call whose listener is gone fails with
// ENOSYS). The kernel allows one listener per filter chain: a thread whose
// chain already has one gets EBUSY.
//
// It asks for SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19): once
// the init has read a call, only a fatal signal ends the caller's wait,
// so a signal can neither make the call fail with EINTR, which the
// kernel's own sysinfo never does, nor return it while the init still
// writes its answer into the caller's memory. On an older kernel, which
// refuses the flag with EINVAL, it installs without it: a signal between
// the init's check that the call waits and its write can then let the
// write land after the call has returned, into memory the caller may
// have reused (docs/sandbox.md).
func InstallNotifying() (listener int, err error) {
	listener, err = install(programNotifying[:], unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
	if !errors.Is(err, unix.EINVAL) {
		return listener, err
	}
	listener, err = install(programNotifying[:], unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	if errors.Is(err, unix.EINVAL) {
		return -1, fmt.Errorf("installing seccomp filter: the kernel lacks seccomp user notification; use Linux %s or newer: %w", MinNotifyingKernel, unix.EINVAL)
	}
	return listener, err
}

// MinNotifyingKernel is the oldest Linux whose seccomp user notification
// the init can serve: 5.0 brought the listener; before 5.9 the kernel
// knows SECCOMP_IOCTL_NOTIF_ID_VALID only by its old number, which the
// init retries with.
const MinNotifyingKernel = "5.0"

// install loads prog on the calling thread with flags, returning what the
// kernel returns on success (a listener with NEW_LISTENER, else 0).
func install(prog []unix.SockFilter, flags uintptr) (int, error) {
	if err := checkArch(); err != nil {
		return -1, err
	}
	// The kernel copies the program; prog itself is never written.
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno == 0:
		return int(r), nil
	case errors.Is(errno, unix.EACCES):
		return -1, fmt.Errorf("installing seccomp filter (is no_new_privs set?): %w", errno)
	default:
		return -1, fmt.Errorf("installing seccomp filter: %w", errno)
	}
}
