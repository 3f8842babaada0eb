package plan

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// The appliers of the ops that prepare the init's own process before the
// root is built. Credentials and the parent-death signal are per thread:
// the caller applies them from the locked thread the program is forked
// from.
func init() {
	appliers[Unshare] = func(i []uint64, _ []string) error { return unix.Unshare(int(i[0])) }
	appliers[CloseRange] = func(i []uint64, _ []string) error {
		return unix.CloseRange(uint(i[0]), uint(uint32(i[1])), uint(i[2]))
	}
	appliers[FileIdentity] = fileIdentity
	appliers[DieWithHost] = dieWithHost
	appliers[LinkUp] = func(_ []uint64, s []string) error { return linkUp(s[0]) }
	appliers[JoinCgroup] = func(i []uint64, _ []string) error { return joinCgroup(int(i[0]), int(i[1])) }
	appliers[LimitCPUs] = func(i []uint64, _ []string) error { return NarrowCPUs(int(min(i[0], 1<<20))) }
}

// fileIdentity drops the supplementary groups, where the user namespace
// allows setgroups, and sets the filesystem ids; setfsuid and setfsgid
// cannot report failure (the kernel answers with the previous id).
func fileIdentity(i []uint64, _ []string) error {
	if b, err := os.ReadFile("/proc/self/setgroups"); err == nil && string(b) == "allow\n" {
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return e
		}
	}
	_ = unix.Setfsgid(int(i[1])) // cannot report failure: the kernel answers with the previous id
	_ = unix.Setfsuid(int(i[0])) // cannot report failure either
	return nil
}

// dieWithHost sets the parent-death signal and fails with EPIPE when the
// host is already gone, which the signal would have missed.
func dieWithHost(i []uint64, _ []string) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(i[0]), 0, 0, 0); err != nil {
		return err
	}
	fds := []unix.PollFd{{Fd: int32(i[1]), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		return err
	}
	if n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0 {
		return unix.EPIPE
	}
	return nil
}

func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// maxRights bounds JoinCgroup's descriptors whatever the op says, as
// MAX_RIGHTS does in warden-exec: one per v1 hierarchy, four today.
const maxRights = 16

// joinCgroup moves the calling thread into every hierarchy whose tasks
// descriptor arrives on sock, and closes them all: the program must never
// hold one, or it could move itself out.
func joinCgroup(sock, max int) error {
	if max <= 0 || max > maxRights {
		return unix.EINVAL
	}
	fds, err := ReceiveRights(sock, max)
	if err != nil {
		return err
	}
	var first error
	for _, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil && first == nil {
			first = err
		}
		if err := unix.Close(fd); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ReceiveRights reads one byte with up to max descriptors attached,
// close-on-exec: EPIPE when the sender hung up, EMSGSIZE when more came
// than max (none is kept then). The Go init receives its cgroup and
// egress descriptors with it too.
func ReceiveRights(sock, max int) ([]int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(max*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if got, perr := unix.ParseUnixRights(&m); perr == nil {
			fds = append(fds, got...)
		}
	}
	switch {
	case err != nil:
		err = unix.EINVAL
	case flags&unix.MSG_CTRUNC != 0:
		err = unix.EMSGSIZE
	case n == 0:
		err = unix.EPIPE
	}
	if err != nil {
		for _, fd := range fds {
			_ = unix.Close(fd) // received, never used: nothing to report
		}
		return nil, err
	}
	return fds, nil
}
