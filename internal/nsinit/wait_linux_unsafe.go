//go:build linux

package nsinit

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitExited waits for any child to end without reaping it, and returns
// its pid: the zombie keeps its pid and process group id reserved, so the
// agent can still signal what is left of the group safely.
func waitExited() (int, error) {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		return 0, err
	}
	return siginfoPid(&info), nil
}

// endedChild says a child of the agent has ended and is not reaped yet
// (a zombie), without reaping it: the reaper has work left.
func endedChild() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// With WNOHANG and no ended child the kernel leaves si_pid 0.
	return err == nil && siginfoPid(&info) != 0
}

// siginfoPid reads si_pid, which x/sys leaves in Siginfo's padding: on
// 64-bit Linux the union after si_signo, si_errno and si_code starts at
// byte 16, and for SIGCHLD it begins with the pid.
func siginfoPid(info *unix.Siginfo) int {
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), 16)))
}
