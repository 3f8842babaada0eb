//go:build linux

package nsinit

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompNotif is struct seccomp_notif: one call waiting for the init's
// answer, with the caller's thread id (in the init's PID namespace) and
// its struct seccomp_data.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp: the call's return value,
// or with Error a negative errno.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// ioctlNotifIDValidOld is SECCOMP_IOCTL_NOTIF_ID_VALID's number before
// Linux 5.9 (and 5.4.59), _IOR rather than _IOW: those kernels answer
// unix.SECCOMP_IOCTL_NOTIF_ID_VALID with EINVAL, and later ones still
// accept this number.
const ioctlNotifIDValidOld = 0x80082102

// notifSyncWakeUp asks the kernel (6.6 and later) to wake the answerer
// and then its caller synchronously, each on the CPU of the other's
// wake-up, as a round trip between two threads wants. An older kernel's
// refusal changes nothing else.
func notifSyncWakeUp(listener int) {
	// see above: an older kernel's refusal is no failure
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
}

// Sizes the kernel encodes in the ioctl numbers.
var (
	_ [unix.SECCOMP_IOCTL_NOTIF_RECV>>16&0x3fff - unsafe.Sizeof(seccompNotif{})]struct{}
	_ [unix.SECCOMP_IOCTL_NOTIF_SEND>>16&0x3fff - unsafe.Sizeof(seccompNotifResp{})]struct{}
)

// notifRecv waits for the next call on listener. n must be zero: the
// kernel refuses a struct with anything in it.
func notifRecv(listener int, n *seccompNotif) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
	return errnoErr(e)
}

// notifSend answers a call.
func notifSend(listener int, r *seccompNotifResp) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(r)))
	return errnoErr(e)
}

// notifIDValid says whether the call id still waits, so the thread id it
// named is still its caller's (seccomp_unotify(2): check after opening
// anything by that id, before using it). Only ENOENT means the call is
// gone; any other failure is returned, and the caller must not use what
// it opened.
func notifIDValid(listener int, id uint64) (bool, error) {
	e := idValid(listener, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, id)
	if e == unix.EINVAL {
		e = idValid(listener, ioctlNotifIDValidOld, id)
	}
	switch e {
	case 0:
		return true, nil
	case unix.ENOENT:
		return false, nil
	default:
		return false, fmt.Errorf("checking seccomp notification %d: %w", id, e)
	}
}

// idValid is SECCOMP_IOCTL_NOTIF_ID_VALID by the ioctl number nr.
func idValid(listener int, nr uintptr, id uint64) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), nr, uintptr(unsafe.Pointer(&id)))
	return e
}

// openAt is openat(2) of a NUL-terminated path held in a caller's buffer,
// so an answer allocates nothing for it.
func openAt(dirfd int, path []byte, flags int) (int, error) {
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&path[0])), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
