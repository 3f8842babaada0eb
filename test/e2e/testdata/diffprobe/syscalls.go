package main

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// bad is a pointer to nowhere: an allowed call given it fails with EFAULT,
// so only a denied one says EPERM, and nothing is changed either way.
const bad = 8

// call is one row of the filter's table: a system call with arguments
// that make it fail harmlessly if the filter lets it through.
type call struct {
	name string
	nr   uintptr
	args [6]uintptr
}

// calls is the table of system calls whose answers are compared: denied
// ones (with the errno the filter gives), allowed controls, and those the
// filter inspects by argument.
var calls = []call{
	{"mount", unix.SYS_MOUNT, [6]uintptr{bad, bad, bad, 0, 0}},
	{"umount2", unix.SYS_UMOUNT2, [6]uintptr{bad, 0}},
	{"ptrace", unix.SYS_PTRACE, [6]uintptr{unix.PTRACE_PEEKDATA, 1, bad, bad}},
	{"keyctl", unix.SYS_KEYCTL, [6]uintptr{^uintptr(0)}},
	{"add_key", unix.SYS_ADD_KEY, [6]uintptr{bad, bad, bad, 0, 0}},
	{"unshare", unix.SYS_UNSHARE, [6]uintptr{1}},
	{"setns", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}},
	{"bpf", unix.SYS_BPF, [6]uintptr{^uintptr(0), bad, 0}},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{0, bad}},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{bad, 0, ^uintptr(0), ^uintptr(0), 0}},
	{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{^uintptr(0)}},
	{"sethostname", unix.SYS_SETHOSTNAME, [6]uintptr{bad, 1}},
	{"chroot", unix.SYS_CHROOT, [6]uintptr{bad}},
	{"pivot_root", unix.SYS_PIVOT_ROOT, [6]uintptr{bad, bad}},
	{"clone_newuser", unix.SYS_CLONE, [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_THREAD}},
	{"clone_plain", unix.SYS_CLONE, [6]uintptr{unix.CLONE_THREAD}},
	{"clone3", unix.SYS_CLONE3, [6]uintptr{bad, 0}},
	{"openat2", unix.SYS_OPENAT2, [6]uintptr{^uintptr(0), bad, bad, 0}},
	{"chmod_setuid", unix.SYS_CHMOD, [6]uintptr{bad, 0o4755}},
	{"chmod_plain", unix.SYS_CHMOD, [6]uintptr{bad, 0o755}},
	{"ioctl_tiocsti", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TIOCSTI, bad}},
	{"ioctl_tcgets", unix.SYS_IOCTL, [6]uintptr{^uintptr(0), unix.TCGETS, bad}},
	{"socket_packet", unix.SYS_SOCKET, [6]uintptr{unix.AF_PACKET, unix.SOCK_RAW, 0}},
	{"socket_netlink_audit", unix.SYS_SOCKET, [6]uintptr{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}},
	{"personality_query", unix.SYS_PERSONALITY, [6]uintptr{0xffffffff}},
	{"personality_other", unix.SYS_PERSONALITY, [6]uintptr{0x0040000}},
	{"prctl_no_new_privs", unix.SYS_PRCTL, [6]uintptr{unix.PR_GET_NO_NEW_PRIVS}},
	{"prctl_seccomp", unix.SYS_PRCTL, [6]uintptr{unix.PR_GET_SECCOMP}},
	{"prctl_dumpable", unix.SYS_PRCTL, [6]uintptr{unix.PR_GET_DUMPABLE}},
	{"sysinfo_bad", unix.SYS_SYSINFO, [6]uintptr{bad}},
	{"syslog", unix.SYS_SYSLOG, [6]uintptr{^uintptr(0), 0, 0}},
	{"reboot", unix.SYS_REBOOT, [6]uintptr{0, 0, 0, 0}},
	{"kill_init", unix.SYS_KILL, [6]uintptr{1, 0}},
}

// syscalls runs the table: "ret=N" for a success (sockets are closed),
// "errno=ENAME" for a failure.
func syscalls() map[string]string {
	m := map[string]string{}
	for _, c := range calls {
		r, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		if e != 0 {
			m[c.name] = result(e)
			continue
		}
		if c.nr == unix.SYS_SOCKET {
			unix.Close(int(r))
			r = 0
		}
		m[c.name] = "ret=" + strconv.Itoa(int(r))
	}
	return m
}

// sysinfo is what sysinfo(2) answers, less the figures that move
// between two calls (free memory, uptime).
func sysinfo() map[string]string {
	var s unix.Sysinfo_t
	if err := unix.Sysinfo(&s); err != nil {
		return map[string]string{"error": result(err)}
	}
	u := uint64(s.Unit)
	return map[string]string{
		"totalram":  strconv.FormatUint(s.Totalram*u, 10),
		"totalswap": strconv.FormatUint(s.Totalswap*u, 10),
		"freeswap":  strconv.FormatUint(s.Freeswap*u, 10),
		"loads":     strconv.FormatUint(s.Loads[0]+s.Loads[1]+s.Loads[2], 10),
		"procs":     strconv.Itoa(int(s.Procs)),
		"unit":      strconv.FormatUint(u, 10),
	}
}
