package microvm

import (
	"golang.org/x/sys/unix"
)

// qemuDenied are the syscalls Warden's filter refuses QEMU (EPERM): none
// is needed by QEMU 7.2 under TCG or KVM with the devices Warden gives it,
// and each reaches the host kernel in a way a guest that took QEMU over
// could use to escalate or to look outside its VM: other processes'
// memory (ptrace, process_vm_*, pidfd_getfd, process_madvise, kcmp), the
// kernel's wide or buggy interfaces (io_uring, bpf, userfaultfd,
// perf_event_open, keyrings), mounts and namespaces (after QEMU's thread
// has set its own up), kernel code and files by handle, and host-wide
// settings (clock, hostname, swap, reboot, accounting, quotas, syslog).
// QEMU's own -sandbox, installed by QEMU after it starts, is a
// denylist too; this one is first, so QEMU cannot drop it.
var qemuDenied = []uint32{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
	unix.SYS_PROCESS_MADVISE, unix.SYS_PROCESS_MRELEASE, unix.SYS_KCMP,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN, unix.SYS_FANOTIFY_INIT,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_MOVE_MOUNT,
	unix.SYS_OPEN_TREE, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOUNT_SETATTR, unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_USELIB,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT, unix.SYS_QUOTACTL,
	unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_VHANGUP, unix.SYS_IOPL,
	unix.SYS_IOPERM, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL, unix.SYS_PERSONALITY,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_MOVE_PAGES, unix.SYS_MIGRATE_PAGES,
}

// qemuNamespaceFlags are the clone flags that make a namespace, which
// clone refuses QEMU: an unprivileged user namespace would give a guest
// that took QEMU over capabilities to mount and reach more of the kernel.
const qemuNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// Where seccomp_data holds the syscall number, the architecture and the
// low 32 bits of the first argument (little-endian).
const (
	dataNr   = 0
	dataArch = 4
	dataArg0 = 16
)

// x32Bit marks the x32 ABI's syscall numbers, which the filter refuses
// outright, as it does any other architecture's: it is written for the
// x86_64 table.
const x32Bit = 0x40000000

// qemuFilter compiles Warden's filter for QEMU into classic BPF: another
// ABI kills QEMU (logged by the kernel), qemuDenied and clone with a
// namespace flag fail with EPERM, socket and socketpair with EPERM for any
// family but AF_UNIX (no network device needs one; AF_VSOCK would reach
// the hypervisor of a nested host, AF_NETLINK the host kernel's
// configuration), clone3 with ENOSYS (its flags are out of the filter's
// reach; the C library then uses clone); all else is allowed, and QEMU's
// own -sandbox narrows it further.
func qemuFilter() []unix.SockFilter {
	var a asm
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataArch)
	a.jump(unix.BPF_JEQ, unix.AUDIT_ARCH_X86_64, "", "kill")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataNr)
	a.jump(unix.BPF_JGE, x32Bit, "kill", "")
	for _, nr := range qemuDenied {
		a.jump(unix.BPF_JEQ, nr, "eperm", "")
	}
	a.jump(unix.BPF_JEQ, unix.SYS_CLONE3, "enosys", "")
	a.jump(unix.BPF_JEQ, unix.SYS_CLONE, "clone", "")
	a.jump(unix.BPF_JEQ, unix.SYS_SOCKET, "socket", "")
	a.jump(unix.BPF_JEQ, unix.SYS_SOCKETPAIR, "socket", "allow")
	a.label("clone")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataArg0)
	a.jump(unix.BPF_JSET, qemuNamespaceFlags, "eperm", "allow")
	a.label("socket")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataArg0)
	a.jump(unix.BPF_JEQ, unix.AF_UNIX, "allow", "eperm")
	a.ret("allow", unix.SECCOMP_RET_ALLOW)
	a.ret("eperm", unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.ret("enosys", unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	a.ret("kill", unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// asm builds a classic BPF program whose jumps name labels ("" is the
// next instruction), all forward, as classic BPF requires.
type asm struct {
	prog   []unix.SockFilter
	jt, jf []string
	labels map[string]int
}

func (a *asm) emit(f unix.SockFilter, jt, jf string) {
	a.prog = append(a.prog, f)
	a.jt, a.jf = append(a.jt, jt), append(a.jf, jf)
}

func (a *asm) stmt(code uint16, k uint32) { a.emit(unix.SockFilter{Code: code, K: k}, "", "") }

func (a *asm) jump(op uint16, k uint32, jt, jf string) {
	a.emit(unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k}, jt, jf)
}

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

// ret is a labelled return of action.
func (a *asm) ret(name string, action uint32) {
	a.label(name)
	a.stmt(unix.BPF_RET|unix.BPF_K, action)
}

// assemble resolves the labels into jump offsets; a jump backwards or
// too far is a bug in qemuFilter, which its test catches.
func (a *asm) assemble() []unix.SockFilter {
	prog := append([]unix.SockFilter(nil), a.prog...)
	for i := range prog {
		prog[i].Jt = a.offset(i, a.jt[i])
		prog[i].Jf = a.offset(i, a.jf[i])
	}
	return prog
}

func (a *asm) offset(from int, label string) uint8 {
	if label == "" {
		return 0
	}
	to, ok := a.labels[label]
	if !ok || to <= from || to-from-1 > 255 {
		panic("microvm: bad jump to " + label + " in QEMU's filter")
	}
	return uint8(to - from - 1)
}
