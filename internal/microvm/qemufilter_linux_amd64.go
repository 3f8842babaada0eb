package microvm

import (
	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

// qemuDenied are the syscalls Warden's filter refuses QEMU (EPERM) beyond
// seccomp.Denied, the project's never-allow list, which it refuses too:
// none is needed by QEMU 7.2 under TCG or KVM with the devices Warden
// gives it, and each reaches the host kernel in a way a guest that took
// QEMU over could use to look outside its VM or weaken it: another
// process's memory (process_mrelease), file handles (name_to_handle_at),
// host-wide filesystem and clock information or settings, the persona
// that changes how the next exec is mapped, and pages of other nodes.
// seccomp.Denied covers the rest (io_uring, bpf, userfaultfd, keyrings,
// mounts, namespaces, ptrace, modules, modify_ldt, ...). QEMU's own
// -sandbox, installed by QEMU after it starts, is a denylist too; this one
// is first, so QEMU cannot drop it.
var qemuDenied = []uint32{
	unix.SYS_PROCESS_MRELEASE, unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_USTAT, unix.SYS_SYSFS,
	unix.SYS_PERSONALITY, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX, unix.SYS_MOVE_PAGES,
	unix.SYS_MIGRATE_PAGES,
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
// ABI kills QEMU (logged by the kernel); a syscall newer than the table
// the project's policy was reviewed against (above seccomp.HighestNumber)
// fails with ENOSYS, as on an older kernel; seccomp.Denied, qemuDenied
// and clone with a namespace flag fail with EPERM, socket and socketpair
// with EPERM for any family but AF_UNIX (no network device needs one;
// AF_VSOCK would reach the hypervisor of a nested host, AF_NETLINK the
// host kernel's configuration), clone3 with ENOSYS (its flags are out of
// the filter's reach; the C library then uses clone); all else is
// allowed, and QEMU's own -sandbox narrows it further.
func qemuFilter() []unix.SockFilter {
	var a asm
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataArch)
	a.jump(unix.BPF_JEQ, unix.AUDIT_ARCH_X86_64, "", "kill")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, dataNr)
	a.jump(unix.BPF_JGE, x32Bit, "kill", "")
	a.jump(unix.BPF_JGT, seccomp.HighestNumber, "enosys", "")
	for _, nr := range append(seccomp.DeniedNumbers[:], qemuDenied...) {
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
