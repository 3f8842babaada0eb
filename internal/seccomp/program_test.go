package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

const auditArchI386 = 0x40000003 // AUDIT_ARCH_I386

// Actions the tests expect, named for readable failures.
const (
	allow  = retAllow
	deny   = retErrno | eperm
	nosys  = retErrno | enosys
	killed = retKillProcess
	notify = retUserNotif
)

func actionName(v uint32) string {
	switch v {
	case allow:
		return "ALLOW"
	case deny:
		return "ERRNO(EPERM)"
	case nosys:
		return "ERRNO(ENOSYS)"
	case killed:
		return "KILL_PROCESS"
	case notify:
		return "USER_NOTIF"
	}
	return fmt.Sprintf("%#x", v)
}

// seccompData lays out struct seccomp_data as the kernel fills it on
// x86_64: nr and arch as little-endian u32 at 0 and 4, each argument as a
// little-endian u64 at 16+8*i (so its low word comes first).
func seccompData(auditArch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[offNr:], nr)
	binary.LittleEndian.PutUint32(b[offArch:], auditArch)
	for i, v := range args {
		binary.LittleEndian.PutUint64(b[offArgs+8*i:], v)
	}
	return b
}

// forVM adapts kernel-layout seccomp_data to x/net/bpf's VM. The kernel's
// 32-bit absolute load reads a native-endian word, but the VM reads every
// word big-endian, as for network packets. Reversing each 4-byte word makes
// the VM see exactly the values the kernel sees, while every word stays at
// its offset, so which half of an argument a rule loads is still tested.
func forVM(b []byte) []byte {
	out := make([]byte, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(b[i:]))
	}
	return out
}

// newVM builds the filter and loads it into the emulator.
func newVM(t *testing.T) *bpf.VM {
	t.Helper()
	prog, err := build()
	if err != nil {
		t.Fatalf("build() error: %v", err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("bpf.NewVM error: %v", err)
	}
	return vm
}

// run returns the seccomp action the filter takes for one syscall.
func run(t *testing.T, vm *bpf.VM, data []byte) uint32 {
	t.Helper()
	got, err := vm.Run(forVM(data))
	if err != nil {
		t.Fatalf("running filter: %v", err)
	}
	return uint32(got)
}

// sys returns the x86_64 number of a syscall name.
func sys(t *testing.T, name string) uint32 {
	t.Helper()
	n, ok := arch.X86_64.SyscallNames[name]
	if !ok {
		t.Fatalf("unknown x86_64 syscall %q", name)
	}
	return uint32(n)
}

func TestFilter(t *testing.T) {
	const (
		sigchld      = 17
		cloneVM      = 0x100
		cloneVfork   = 0x4000
		clonePidfd   = 0x1000
		cloneNewUser = 0x10000000
		cloneNewNet  = 0x40000000
		cloneNewNS   = 0x20000
		// Go runtime thread creation: CLONE_VM|FS|FILES|SIGHAND|SYSVSEM|THREAD.
		cloneGoThread = 0x100 | 0x200 | 0x400 | 0x800 | 0x40000 | 0x10000

		tcgets   = 0x5401
		fionread = 0x541B

		fSetlk    = 6    // F_SETLK
		fGetfl    = 3    // F_GETFL
		fGetlease = 1025 // F_GETLEASE

		afPacket     = 17
		afAlg        = 38
		afVsock      = 40
		afBluetooth  = 31
		sockStream   = 1
		sockRaw      = 3
		netlinkAudit = 9
		sockDgram    = 2
		sockSeqpack  = 5

		ipprotoSCTP    = 132
		ipprotoDCCP    = 33
		ipprotoL2TP    = 115
		ipprotoUDPLite = 136
		ipprotoMPTCP   = 262
		ipprotoRaw     = 255

		addrNoRandomize = 0x0040000 // ADDR_NO_RANDOMIZE (setarch -R)
		readImpliesExec = 0x0400000 // READ_IMPLIES_EXEC
		mmapPageZero    = 0x0100000 // MMAP_PAGE_ZERO

		rlimitNofile = 7
		ptr          = 0x00007FFD_12345678 // a user stack address
		ptrHighOnly  = 0x00000001_00000000 // not NULL, though its low word is

		atFDCWD    = 0xFFFFFF9C // AT_FDCWD (-100) as the kernel's int
		oWronly    = 0o1
		oCreat     = 0o100
		oNonblock  = 0o4000 // same value as S_ISUID, in the flags argument
		oTmpfile   = 0o20200000
		sIFREG     = 0o100000
		sIFIFO     = 0o10000
		setuid755  = 0o4755
		setgid755  = 0o2755
		setuidgid  = 0o6755
		stickyMode = 0o1777 // S_ISVTX alone is not set-id

		high = 0xFFFFFFFF_00000000 // garbage the kernel truncates away
	)
	tests := []struct {
		name string
		arch uint32 // 0 means x86_64
		sys  string // syscall name, or "" to use nr
		nr   uint32
		args []uint64
		want uint32
	}{
		{name: "read", sys: "read", want: allow},
		{name: "write", sys: "write", want: allow},
		{name: "execve", sys: "execve", want: allow},
		{name: "getpid", sys: "getpid", want: allow},
		{name: "exit_group", sys: "exit_group", want: allow},

		{name: "mount", sys: "mount", want: deny},
		{name: "umount2", sys: "umount2", want: deny},
		{name: "pivot_root", sys: "pivot_root", want: deny},
		{name: "unshare", sys: "unshare", args: []uint64{cloneNewUser}, want: deny},
		{name: "setns", sys: "setns", want: deny},
		{name: "ptrace", sys: "ptrace", want: deny},
		{name: "process_vm_readv", sys: "process_vm_readv", want: deny},
		{name: "bpf", sys: "bpf", want: deny},
		{name: "perf_event_open", sys: "perf_event_open", want: deny},
		{name: "io_uring_setup", sys: "io_uring_setup", want: deny},
		{name: "userfaultfd", sys: "userfaultfd", want: deny},
		{name: "keyctl", sys: "keyctl", want: deny},
		{name: "add_key", sys: "add_key", want: deny},
		{name: "kexec_load", sys: "kexec_load", want: deny},
		{name: "init_module", sys: "init_module", want: deny},
		{name: "unknown syscall 999", nr: 999, want: deny},

		{name: "clone SIGCHLD (fork)", sys: "clone", args: []uint64{sigchld}, want: allow},
		{name: "clone Go thread", sys: "clone", args: []uint64{cloneGoThread}, want: allow},
		{name: "clone Go os/exec", sys: "clone", args: []uint64{cloneVfork | cloneVM | clonePidfd | sigchld}, want: allow},
		{name: "clone high bits ignored by kernel", sys: "clone", args: []uint64{high | sigchld}, want: allow},
		{name: "clone CLONE_NEWUSER", sys: "clone", args: []uint64{cloneNewUser}, want: deny},
		{name: "clone CLONE_NEWNET|SIGCHLD", sys: "clone", args: []uint64{cloneNewNet | sigchld}, want: deny},
		{name: "clone CLONE_NEWNS with high bits", sys: "clone", args: []uint64{high | cloneNewNS}, want: deny},
		{name: "clone3", sys: "clone3", want: nosys},

		{name: "ioctl TCGETS", sys: "ioctl", args: []uint64{0, tcgets}, want: allow},
		{name: "ioctl FIONREAD", sys: "ioctl", args: []uint64{0, fionread}, want: allow},
		{name: "ioctl TCGETS with high bits", sys: "ioctl", args: []uint64{0, high | tcgets}, want: allow},
		{name: "ioctl TIOCSTI", sys: "ioctl", args: []uint64{0, tiocsti}, want: deny},
		{name: "ioctl 0xFFFFFFFF00005412 is TIOCSTI", sys: "ioctl", args: []uint64{0, high | tiocsti}, want: deny},
		{name: "ioctl 0x100005412 is TIOCSTI", sys: "ioctl", args: []uint64{0, 1<<32 | tiocsti}, want: deny},
		{name: "ioctl TIOCLINUX", sys: "ioctl", args: []uint64{0, tioclinux}, want: deny},
		{name: "ioctl TIOCLINUX with high bits", sys: "ioctl", args: []uint64{0, high | tioclinux}, want: deny},
		{name: "ioctl TIOCSTI in fd, not cmd", sys: "ioctl", args: []uint64{tiocsti, tcgets}, want: allow},

		{name: "fcntl F_GETFL", sys: "fcntl", args: []uint64{0, fGetfl}, want: allow},
		{name: "fcntl F_SETLK", sys: "fcntl", args: []uint64{0, fSetlk}, want: allow},
		{name: "fcntl F_GETLEASE", sys: "fcntl", args: []uint64{0, fGetlease}, want: allow},
		{name: "fcntl F_SETLEASE", sys: "fcntl", args: []uint64{0, fSetlease}, want: deny},
		{name: "fcntl F_SETLEASE with high bits", sys: "fcntl", args: []uint64{0, high | fSetlease}, want: deny},
		{name: "fcntl F_SETLEASE in fd, not cmd", sys: "fcntl", args: []uint64{fSetlease, fGetfl}, want: allow},

		{name: "socket AF_UNIX", sys: "socket", args: []uint64{afUnix, sockStream, 0}, want: allow},
		{name: "socket AF_INET", sys: "socket", args: []uint64{afInet, sockStream, 0}, want: allow},
		{name: "socket AF_INET6", sys: "socket", args: []uint64{afInet6, sockStream, 0}, want: allow},
		{name: "socket AF_INET with high bits", sys: "socket", args: []uint64{high | afInet, sockStream, 0}, want: allow},
		{name: "socket AF_NETLINK NETLINK_ROUTE", sys: "socket", args: []uint64{afNetlink, sockRaw, netlinkRoute}, want: allow},
		{name: "socket AF_NETLINK NETLINK_ROUTE with high bits", sys: "socket", args: []uint64{afNetlink, sockRaw, high | netlinkRoute}, want: allow},
		{name: "socket AF_NETLINK NETLINK_AUDIT", sys: "socket", args: []uint64{afNetlink, sockRaw, netlinkAudit}, want: deny},
		{name: "socket AF_PACKET", sys: "socket", args: []uint64{afPacket, sockRaw, 0}, want: deny},
		{name: "socket AF_PACKET with high bits", sys: "socket", args: []uint64{high | afPacket, sockRaw, 0}, want: deny},
		{name: "socket AF_INET in high word only is AF_UNSPEC", sys: "socket", args: []uint64{afInet << 32, sockStream, 0}, want: deny},
		{name: "socket AF_ALG", sys: "socket", args: []uint64{afAlg, 5, 0}, want: deny},
		{name: "socket AF_VSOCK", sys: "socket", args: []uint64{afVsock, sockStream, 0}, want: deny},
		{name: "socket AF_BLUETOOTH", sys: "socket", args: []uint64{afBluetooth, sockRaw, 0}, want: deny},
		{name: "socketpair AF_UNIX", sys: "socketpair", args: []uint64{afUnix, sockStream, 0}, want: allow},
		{name: "socketpair AF_PACKET", sys: "socketpair", args: []uint64{afPacket, sockRaw, 0}, want: deny},
		{name: "socket AF_INET IPPROTO_TCP", sys: "socket", args: []uint64{afInet, sockStream, ipprotoTCP}, want: allow},
		{name: "socket AF_INET IPPROTO_UDP", sys: "socket", args: []uint64{afInet, sockDgram, ipprotoUDP}, want: allow},
		{name: "socket AF_INET IPPROTO_ICMP (ping)", sys: "socket", args: []uint64{afInet, sockDgram, ipprotoICMP}, want: allow},
		{name: "socket AF_INET6 IPPROTO_ICMPV6 (ping)", sys: "socket", args: []uint64{afInet6, sockDgram, ipprotoICMPv6}, want: allow},
		{name: "socket AF_INET6 IPPROTO_TCP with high bits", sys: "socket", args: []uint64{afInet6, sockStream, high | ipprotoTCP}, want: allow},
		{name: "socket AF_INET IPPROTO_SCTP", sys: "socket", args: []uint64{afInet, sockStream, ipprotoSCTP}, want: deny},
		{name: "socket AF_INET6 IPPROTO_SCTP seqpacket", sys: "socket", args: []uint64{afInet6, sockSeqpack, ipprotoSCTP}, want: deny},
		{name: "socket AF_INET IPPROTO_DCCP", sys: "socket", args: []uint64{afInet, 6, ipprotoDCCP}, want: deny},
		{name: "socket AF_INET IPPROTO_L2TP", sys: "socket", args: []uint64{afInet, sockDgram, ipprotoL2TP}, want: deny},
		{name: "socket AF_INET IPPROTO_UDPLITE", sys: "socket", args: []uint64{afInet, sockDgram, ipprotoUDPLite}, want: deny},
		{name: "socket AF_INET IPPROTO_MPTCP", sys: "socket", args: []uint64{afInet, sockStream, ipprotoMPTCP}, want: deny},
		{name: "socket AF_INET SOCK_RAW IPPROTO_RAW", sys: "socket", args: []uint64{afInet, sockRaw, ipprotoRaw}, want: deny},
		{name: "socket AF_INET IPPROTO_SCTP with high bits", sys: "socket", args: []uint64{afInet, sockStream, high | ipprotoSCTP}, want: deny},
		{name: "socket AF_INET IPPROTO_TCP in high word only is IPPROTO_IP", sys: "socket", args: []uint64{afInet, sockStream, ipprotoTCP << 32}, want: allow},
		{name: "socket AF_INET SCTP number in type, not protocol", sys: "socket", args: []uint64{afInet, ipprotoSCTP, 0}, want: allow},
		{name: "socket AF_UNIX protocol 132 (kernel refuses it)", sys: "socket", args: []uint64{afUnix, sockStream, ipprotoSCTP}, want: allow},
		{name: "socketpair AF_INET IPPROTO_SCTP", sys: "socketpair", args: []uint64{afInet, sockStream, ipprotoSCTP}, want: deny},
		{name: "socketpair AF_INET6 IPPROTO_TCP", sys: "socketpair", args: []uint64{afInet6, sockStream, ipprotoTCP}, want: allow},

		{name: "personality query", sys: "personality", args: []uint64{personaQuery}, want: allow},
		{name: "personality query, 64-bit -1", sys: "personality", args: []uint64{0xFFFFFFFF_FFFFFFFF}, want: allow},
		{name: "personality PER_LINUX", sys: "personality", args: []uint64{perLinux}, want: allow},
		{name: "personality PER_LINUX32", sys: "personality", args: []uint64{perLinux32}, want: allow},
		{name: "personality UNAME26", sys: "personality", args: []uint64{uname26}, want: allow},
		{name: "personality PER_LINUX32|UNAME26", sys: "personality", args: []uint64{perLinux32 | uname26}, want: allow},
		{name: "personality PER_LINUX32 with high bits", sys: "personality", args: []uint64{high | perLinux32}, want: allow},
		{name: "personality ADDR_NO_RANDOMIZE", sys: "personality", args: []uint64{addrNoRandomize}, want: deny},
		{name: "personality READ_IMPLIES_EXEC", sys: "personality", args: []uint64{readImpliesExec}, want: deny},
		{name: "personality MMAP_PAGE_ZERO", sys: "personality", args: []uint64{mmapPageZero}, want: deny},
		{name: "personality PER_LINUX32|ADDR_NO_RANDOMIZE", sys: "personality", args: []uint64{perLinux32 | addrNoRandomize}, want: deny},
		{name: "personality ADDR_NO_RANDOMIZE with high bits", sys: "personality", args: []uint64{high | addrNoRandomize}, want: deny},
		{name: "personality 0xfffffffe", sys: "personality", args: []uint64{0xFFFFFFFE}, want: deny},

		{name: "prlimit64 self get", sys: "prlimit64", args: []uint64{0, rlimitNofile, 0, ptr}, want: allow},
		{name: "prlimit64 self set", sys: "prlimit64", args: []uint64{0, rlimitNofile, ptr, 0}, want: allow},
		{name: "prlimit64 self set and get", sys: "prlimit64", args: []uint64{0, rlimitNofile, ptr, ptr}, want: allow},
		{name: "prlimit64 pid 1 get", sys: "prlimit64", args: []uint64{1, rlimitNofile, 0, ptr}, want: allow},
		{name: "prlimit64 pid 1 set", sys: "prlimit64", args: []uint64{1, rlimitNofile, ptr, 0}, want: deny},
		{name: "prlimit64 pid 1 set and get", sys: "prlimit64", args: []uint64{1, rlimitNofile, ptr, ptr}, want: deny},
		{name: "prlimit64 pid 1 set, pointer's low word 0", sys: "prlimit64", args: []uint64{1, rlimitNofile, ptrHighOnly, 0}, want: deny},
		{name: "prlimit64 pid 1 set, pointer's high word 0", sys: "prlimit64", args: []uint64{1, rlimitNofile, 0x12345678, 0}, want: deny},
		{name: "prlimit64 pid 0 with high bits is self", sys: "prlimit64", args: []uint64{high, rlimitNofile, ptr, 0}, want: allow},
		{name: "prlimit64 pid 1 with high bits", sys: "prlimit64", args: []uint64{high | 1, rlimitNofile, ptr, 0}, want: deny},
		{name: "prlimit64 pid -1", sys: "prlimit64", args: []uint64{0xFFFFFFFF, rlimitNofile, ptr, 0}, want: deny},
		{name: "prlimit64 pid 1 in resource, not pid", sys: "prlimit64", args: []uint64{0, 1, ptr, 0}, want: allow},
		{name: "prlimit64 pid 1, pointer in old only", sys: "prlimit64", args: []uint64{1, rlimitNofile, 0, ptrHighOnly}, want: allow},
		{name: "setrlimit is not prlimit64", sys: "setrlimit", args: []uint64{rlimitNofile, ptr}, want: allow},

		{name: "openat O_RDONLY", sys: "openat", args: []uint64{atFDCWD, 0, 0, 0}, want: allow},
		{name: "openat O_CREAT 0644", sys: "openat", args: []uint64{atFDCWD, 0, oCreat | oWronly, 0o644}, want: allow},
		{name: "openat O_CREAT 01777", sys: "openat", args: []uint64{atFDCWD, 0, oCreat | oWronly, stickyMode}, want: allow},
		{name: "openat O_CREAT 0644 with high bits", sys: "openat", args: []uint64{atFDCWD, 0, oCreat, high | 0o644}, want: allow},
		{name: "openat O_NONBLOCK is not S_ISUID", sys: "openat", args: []uint64{atFDCWD, 0, oNonblock, 0}, want: allow},
		{name: "openat S_ISUID in high word only", sys: "openat", args: []uint64{atFDCWD, 0, oCreat, 0o4000 << 32}, want: allow},
		{name: "openat O_CREAT 04755", sys: "openat", args: []uint64{atFDCWD, 0, oCreat | oWronly, setuid755}, want: deny},
		{name: "openat O_CREAT 02755", sys: "openat", args: []uint64{atFDCWD, 0, oCreat | oWronly, setgid755}, want: deny},
		{name: "openat O_CREAT 06755", sys: "openat", args: []uint64{atFDCWD, 0, oCreat, setuidgid}, want: deny},
		{name: "openat O_CREAT 04755 with high bits", sys: "openat", args: []uint64{atFDCWD, 0, oCreat, high | setuid755}, want: deny},
		{name: "openat O_TMPFILE 04755", sys: "openat", args: []uint64{atFDCWD, 0, oTmpfile | oWronly, setuid755}, want: deny},
		{name: "openat without O_CREAT, stray 04000 mode", sys: "openat", args: []uint64{atFDCWD, 0, 0, 0o4000}, want: deny},
		{name: "open O_CREAT 0644", sys: "open", args: []uint64{0, oCreat | oWronly, 0o644}, want: allow},
		{name: "open O_NONBLOCK is not S_ISUID", sys: "open", args: []uint64{0, oNonblock, 0}, want: allow},
		{name: "open O_CREAT 04755", sys: "open", args: []uint64{0, oCreat | oWronly, setuid755}, want: deny},
		{name: "creat 0755", sys: "creat", args: []uint64{0, 0o755}, want: allow},
		{name: "creat 02755", sys: "creat", args: []uint64{0, setgid755}, want: deny},
		{name: "chmod 0755", sys: "chmod", args: []uint64{0, 0o755}, want: allow},
		{name: "chmod 04755", sys: "chmod", args: []uint64{0, setuid755}, want: deny},
		{name: "chmod 02755 with high bits", sys: "chmod", args: []uint64{0, high | setgid755}, want: deny},
		{name: "fchmod 0600", sys: "fchmod", args: []uint64{0, 0o600}, want: allow},
		{name: "fchmod fd 04000 is not a mode", sys: "fchmod", args: []uint64{0o4000, 0o600}, want: allow},
		{name: "fchmod 04755", sys: "fchmod", args: []uint64{3, setuid755}, want: deny},
		{name: "fchmodat 0755", sys: "fchmodat", args: []uint64{atFDCWD, 0, 0o755}, want: allow},
		{name: "fchmodat 04755", sys: "fchmodat", args: []uint64{atFDCWD, 0, setuid755}, want: deny},
		{name: "fchmodat2 0755 AT_SYMLINK_NOFOLLOW", sys: "fchmodat2", args: []uint64{atFDCWD, 0, 0o755, 0x100}, want: allow},
		{name: "fchmodat2 06755", sys: "fchmodat2", args: []uint64{atFDCWD, 0, setuidgid, 0}, want: deny},
		{name: "mknod S_IFIFO|0644", sys: "mknod", args: []uint64{0, sIFIFO | 0o644, 0}, want: allow},
		{name: "mknod S_IFREG|04644", sys: "mknod", args: []uint64{0, sIFREG | 0o4644, 0}, want: deny},
		{name: "mknodat S_IFREG|0644", sys: "mknodat", args: []uint64{atFDCWD, 0, sIFREG | 0o644, 0}, want: allow},
		{name: "mknodat S_IFREG|04644", sys: "mknodat", args: []uint64{atFDCWD, 0, sIFREG | 0o4644, 0}, want: deny},
		{name: "mknodat S_IFIFO|02644", sys: "mknodat", args: []uint64{atFDCWD, 0, sIFIFO | 0o2644, 0}, want: deny},
		{name: "mkdir 02755 (setgid directory)", sys: "mkdir", args: []uint64{0, setgid755}, want: allow},
		{name: "mkdirat 06755", sys: "mkdirat", args: []uint64{atFDCWD, 0, setuidgid}, want: allow},
		{name: "openat2", sys: "openat2", args: []uint64{atFDCWD, 0, 0, 24}, want: nosys},
		{name: "modify_ldt", sys: "modify_ldt", want: deny},

		{name: "i386 ABI (int 0x80)", arch: auditArchI386, nr: 20, want: killed},
		{name: "i386 ABI, number of x86_64 read", arch: auditArchI386, nr: 0, want: killed},
		{name: "other arch (aarch64)", arch: 0xC00000B7, nr: 63, want: killed},
		{name: "x32 read", nr: x32SyscallBit, want: killed},
		{name: "x32 execve", nr: x32SyscallBit | 520, want: killed},
		{name: "x32 mount", nr: x32SyscallBit | 165, want: killed},
		{name: "nr -1", nr: 0xFFFFFFFF, want: killed},
	}
	vm := newVM(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, nr := uint32(auditArchX86_64), tt.nr
			if tt.arch != 0 {
				a = tt.arch
			}
			if tt.sys != "" {
				nr = sys(t, tt.sys)
			}
			if got := run(t, vm, seccompData(a, nr, tt.args...)); got != tt.want {
				t.Errorf("filter(arch=%#x nr=%d args=%#x) = %s, want %s", a, nr, tt.args, actionName(got), actionName(tt.want))
			}
		})
	}
}

// TestFilterEveryName checks the outcome for every syscall the policy
// names, with all-zero arguments.
func TestFilterEveryName(t *testing.T) {
	vm := newVM(t)
	check := func(name string, want uint32) {
		t.Helper()
		if got := run(t, vm, seccompData(auditArchX86_64, sys(t, name))); got != want {
			t.Errorf("filter(%s) = %s, want %s", name, actionName(got), actionName(want))
		}
	}
	for _, name := range allowlist {
		check(name, allow)
	}
	for _, name := range Denied {
		check(name, deny)
	}
}

// TestFilterEveryModeRule checks every syscall setIDRules covers: allowed
// with a plain mode, refused with either set-id bit in the mode argument,
// and not refused for set-id bits in any other argument, which would mean
// the rule reads the wrong one.
func TestFilterEveryModeRule(t *testing.T) {
	vm := newVM(t)
	for _, m := range modeArgs {
		argsWith := func(mode, others uint64) []uint64 {
			args := make([]uint64, 6)
			for i := range args {
				args[i] = others
			}
			args[m.arg] = mode
			return args
		}
		tests := []struct {
			name string
			args []uint64
			want uint32
		}{
			{"zero arguments", nil, allow},
			{"mode 0777", argsWith(0o777, 0), allow},
			{"mode S_ISUID", argsWith(0o4000, 0), deny},
			{"mode S_ISGID", argsWith(0o2000, 0), deny},
			{"set-id bits in every other argument", argsWith(0o644, setIDBits), allow},
		}
		for _, tt := range tests {
			if got := run(t, vm, seccompData(auditArchX86_64, sys(t, m.name), tt.args...)); got != tt.want {
				t.Errorf("filter(%s, %s: %#o) = %s, want %s", m.name, tt.name, tt.args, actionName(got), actionName(tt.want))
			}
		}
	}
}

// TestFilterEverySocketProtocol walks protocol numbers 0 to 1023 and a few
// odd ones, for socket and socketpair, for each family socketRule lets
// through, with and without garbage in the high word: AF_INET and AF_INET6
// must accept exactly inetProtocols, AF_UNIX any protocol (the kernel
// itself refuses all but 0) and AF_NETLINK only NETLINK_ROUTE.
func TestFilterEverySocketProtocol(t *testing.T) {
	inet := map[uint32]bool{}
	for _, p := range inetProtocols {
		inet[p.val] = true
	}
	families := []struct {
		name    string
		family  uint32
		allowed func(proto uint32) bool
	}{
		{"AF_INET", afInet, func(p uint32) bool { return inet[p] }},
		{"AF_INET6", afInet6, func(p uint32) bool { return inet[p] }},
		{"AF_UNIX", afUnix, func(uint32) bool { return true }},
		{"AF_NETLINK", afNetlink, func(p uint32) bool { return p == netlinkRoute }},
	}
	protos := []uint32{0xFFFFFFFF, 0x80000000, 1<<16 | ipprotoTCP, 1<<8 | ipprotoTCP}
	for p := range uint32(1024) {
		protos = append(protos, p)
	}
	vm := newVM(t)
	for _, call := range []string{"socket", "socketpair"} {
		for _, f := range families {
			for _, proto := range protos {
				want := uint32(deny)
				if f.allowed(proto) {
					want = allow
				}
				for _, high := range []uint64{0, 0xFFFFFFFF_00000000} {
					args := []uint64{uint64(f.family), 1, high | uint64(proto)}
					if got := run(t, vm, seccompData(auditArchX86_64, sys(t, call), args...)); got != want {
						t.Errorf("filter(%s(%s, 1, %#x)) = %s, want %s", call, f.name, args[2], actionName(got), actionName(want))
					}
				}
			}
		}
	}
}

// TestFilterEveryPersona checks personality around every value in personas:
// each allowed value, its complement, and every value one bit away from it
// (which covers every single flag alone, next to PER_LINUX), with and
// without garbage in the high word. Exactly the values in personas pass.
func TestFilterEveryPersona(t *testing.T) {
	allowed := map[uint32]bool{}
	var values []uint32
	for _, p := range personas {
		allowed[p.val] = true
		values = append(values, p.val, ^p.val)
		for bit := range 32 {
			values = append(values, p.val^1<<bit)
		}
	}
	vm := newVM(t)
	for _, v := range values {
		want := uint32(deny)
		if allowed[v] {
			want = allow
		}
		for _, high := range []uint64{0, 1 << 32, 0xFFFFFFFF_00000000} {
			arg := high | uint64(v)
			if got := run(t, vm, seccompData(auditArchX86_64, sys(t, "personality"), arg)); got != want {
				t.Errorf("filter(personality(%#x)) = %s, want %s", arg, actionName(got), actionName(want))
			}
		}
	}
}

// TestFilterEveryPrlimit checks prlimit64 over combinations of pid,
// new_limit and old_limit: refused exactly when the pid's low word is not 0
// (another process, as the kernel reads a pid_t) and new_limit, all 64 bits
// of it, is not NULL.
func TestFilterEveryPrlimit(t *testing.T) {
	pids := []uint64{0, 1, 2, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 0xFFFFFFFF_00000000, 1<<32 | 1}
	news := []uint64{0, 1, 0x12345678, 0x00007FFD_12345678, 1 << 32, 1 << 63, 0xFFFFFFFF_FFFFFFFF}
	olds := []uint64{0, 0x00007FFD_12345678, 1 << 32}
	vm := newVM(t)
	for _, pid := range pids {
		for _, newLim := range news {
			for _, old := range olds {
				want := uint32(allow)
				if uint32(pid) != 0 && newLim != 0 {
					want = deny
				}
				args := []uint64{pid, 7 /* RLIMIT_NOFILE */, newLim, old}
				if got := run(t, vm, seccompData(auditArchX86_64, sys(t, "prlimit64"), args...)); got != want {
					t.Errorf("filter(prlimit64(%#x, 7, %#x, %#x)) = %s, want %s", pid, newLim, old, actionName(got), actionName(want))
				}
			}
		}
	}
}

// TestUnruledSyscallsReadNoArguments checks the property the rule order
// relies on: every syscall without an argument rule is answered from its
// number alone, never after loading an argument, so the kernel's
// per-syscall action cache (which gives up on any path that reads an
// argument) covers it wherever its check sits. It walks every x86_64
// syscall and a range of unassigned numbers, with every argument bit set.
func TestUnruledSyscallsReadNoArguments(t *testing.T) {
	prog, err := build()
	if err != nil {
		t.Fatalf("build() error: %v", err)
	}
	check := func(name string, nr uint32) {
		t.Helper()
		const ones = 0xFFFFFFFF_FFFFFFFF
		data := seccompData(auditArchX86_64, nr, ones, ones, ones, ones, ones, ones)
		if _, action, readArgs := trace(t, prog, data); readArgs {
			t.Errorf("filter(%s) read an argument before answering %s; want an answer from the number alone", name, actionName(action))
		}
	}
	for nr, name := range arch.X86_64.SyscallNumbers {
		if !slices.Contains(ruled, name) {
			check(name, uint32(nr))
		}
	}
	for nr := range uint32(1024) {
		if _, ok := arch.X86_64.SyscallNumbers[int(nr)]; !ok {
			check(fmt.Sprintf("unassigned nr %d", nr), nr)
		}
	}
}

// TestModeArgsMatchRuled checks that modeArgs names each syscall once and
// that every one is in ruled, as build requires.
func TestModeArgsMatchRuled(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range modeArgs {
		if seen[m.name] {
			t.Errorf("modeArgs lists %q twice", m.name)
		}
		seen[m.name] = true
		if !slices.Contains(ruled, m.name) {
			t.Errorf("modeArgs has %q, which is not in ruled", m.name)
		}
	}
}

// TestOpenatFastPath pins the cost of the busiest ruled syscalls, whose
// answer the kernel cannot cache: openat without set-id bits must be
// allowed in eight instructions (four for the ABI check, then match, load,
// test, allow), and open in one more.
func TestOpenatFastPath(t *testing.T) {
	prog, err := build()
	if err != nil {
		t.Fatalf("build() error: %v", err)
	}
	const atFDCWD, oCreat = 0xFFFFFF9C, 0o100
	tests := []struct {
		name       string
		data       []byte
		wantSteps  int
		wantAction uint32
	}{
		{"openat O_RDONLY", seccompData(auditArchX86_64, sys(t, "openat"), atFDCWD, 0, 0, 0), 8, allow},
		{"openat O_CREAT 0644", seccompData(auditArchX86_64, sys(t, "openat"), atFDCWD, 0, oCreat, 0o644), 8, allow},
		{"openat O_CREAT 04755", seccompData(auditArchX86_64, sys(t, "openat"), atFDCWD, 0, oCreat, 0o4755), 8, deny},
		{"open O_CREAT 0644", seccompData(auditArchX86_64, sys(t, "open"), 0, oCreat, 0o644), 9, allow},
	}
	vm := newVM(t)
	for _, tt := range tests {
		steps, action, _ := trace(t, prog, tt.data)
		if vmAction := run(t, vm, tt.data); action != vmAction {
			t.Fatalf("%s: trace answers %s, the BPF VM %s", tt.name, actionName(action), actionName(vmAction))
		}
		if steps != tt.wantSteps || action != tt.wantAction {
			t.Errorf("%s: ran %d instructions to %s, want %d to %s",
				tt.name, steps, actionName(action), tt.wantSteps, actionName(tt.wantAction))
		}
	}
}

// trace runs prog on kernel-layout data, counts the instructions it
// executes, which x/net/bpf's VM does not report, and says whether it
// loaded any word of a syscall argument. It knows only the instructions
// asm emits and fails the test on any other.
func trace(t *testing.T, prog []bpf.Instruction, data []byte) (steps int, action uint32, readArgs bool) {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		steps++
		switch ins := prog[pc].(type) {
		case bpf.LoadAbsolute:
			acc = binary.LittleEndian.Uint32(data[ins.Off:])
			readArgs = readArgs || ins.Off >= offArgs
		case bpf.JumpIf:
			if jumpTaken(t, ins, acc) {
				pc += int(ins.SkipTrue)
			} else {
				pc += int(ins.SkipFalse)
			}
		case bpf.RetConstant:
			return steps, ins.Val, readArgs
		default:
			t.Fatalf("trace: unsupported instruction %d: %#v", pc, ins)
		}
	}
	t.Fatalf("trace: ran off the end of the program")
	return 0, 0, false
}

// jumpTaken evaluates the conditions asm's callers use.
func jumpTaken(t *testing.T, ins bpf.JumpIf, acc uint32) bool {
	t.Helper()
	switch ins.Cond {
	case bpf.JumpEqual:
		return acc == ins.Val
	case bpf.JumpBitsSet:
		return acc&ins.Val != 0
	case bpf.JumpGreaterOrEqual:
		return acc >= ins.Val
	case bpf.JumpGreaterThan:
		return acc > ins.Val
	}
	t.Fatalf("trace: unsupported jump condition %v", ins.Cond)
	return false
}

// TestFilterDefaultDenies walks every x86_64 syscall number: those neither
// allowlisted nor ruled must get EPERM, and so must every unassigned
// number up to 1024, which no range of allowed numbers may take in.
func TestFilterDefaultDenies(t *testing.T) {
	vm := newVM(t)
	known := map[string]bool{}
	for _, name := range append(append([]string{}, allowlist...), ruled...) {
		known[name] = true
	}
	for nr, name := range arch.X86_64.SyscallNumbers {
		if known[name] {
			continue
		}
		if got := run(t, vm, seccompData(auditArchX86_64, uint32(nr))); got != deny {
			t.Errorf("filter(%s) = %s, want %s", name, actionName(got), actionName(deny))
		}
	}
	for nr := range uint32(1024) {
		if _, ok := arch.X86_64.SyscallNumbers[int(nr)]; ok {
			continue
		}
		if got := run(t, vm, seccompData(auditArchX86_64, nr)); got != deny {
			t.Errorf("filter(unassigned nr %d) = %s, want %s", nr, actionName(got), actionName(deny))
		}
	}
}

// TestSyscallTable spot-checks go-seccomp-bpf's x86_64 table, which the
// filter trusts for every number, against arch/x86/entry/syscalls/syscall_64.tbl.
func TestSyscallTable(t *testing.T) {
	tests := []struct {
		name string
		want uint32
	}{
		{"read", 0}, {"write", 1}, {"ioctl", 16}, {"socket", 41}, {"socketpair", 53},
		{"clone", 56}, {"execve", 59}, {"ptrace", 101}, {"mount", 165}, {"unshare", 272},
		{"setns", 308}, {"bpf", 321}, {"userfaultfd", 323}, {"io_uring_setup", 425},
		{"clone3", 435}, {"close_range", 436},
		{"open", 2}, {"chmod", 90}, {"fchmod", 91}, {"creat", 85}, {"mknod", 133}, {"modify_ldt", 154},
		{"openat", 257}, {"mknodat", 259}, {"fchmodat", 268}, {"openat2", 437}, {"fchmodat2", 452},
		{"personality", 135}, {"prlimit64", 302},
	}
	for _, tt := range tests {
		if got := sys(t, tt.name); got != tt.want {
			t.Errorf("x86_64 number of %s = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestProgramFitsKernelLimit(t *testing.T) {
	prog, err := build()
	if err != nil {
		t.Fatalf("build() error: %v", err)
	}
	// BPF_MAXINSNS: the kernel refuses longer classic filters.
	if got, limit := len(prog), 4096; got > limit {
		t.Errorf("filter has %d instructions, want at most %d", got, limit)
	}
}

// TestNotifyingProgramDiffers checks the two programs against each other
// in the emulator: every x86_64 syscall number up to 1024 and every
// syscall of the policy's argument rules, with arguments that take each
// rule's either way, gets the same answer from both, except the syscalls
// in notified, which buildNotifying sends to the init and build allows.
func TestNotifyingProgramDiffers(t *testing.T) {
	plain := newVM(t)
	prog, err := buildNotifying()
	if err != nil {
		t.Fatalf("buildNotifying() error: %v", err)
	}
	notifying, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("bpf.NewVM error: %v", err)
	}
	argSets := [][]uint64{nil, {0x7E020000, 0x5412, 0x6000, 0xC00}, {1, 1, 1, 1}, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}}
	for nr := range uint32(1024) {
		name := arch.X86_64.SyscallNumbers[int(nr)]
		for _, args := range argSets {
			data := seccompData(auditArchX86_64, nr, args...)
			got, base := run(t, notifying, data), run(t, plain, data)
			want := base
			if slices.Contains(notified, name) {
				want = notify
				if base != allow {
					t.Errorf("build's filter(%s) = %s, want %s: the kernel answers it in gVisor", name, actionName(base), actionName(allow))
				}
			}
			if got != want {
				t.Errorf("buildNotifying's filter(%s, nr %d, args %#x) = %s, want %s", name, nr, args, actionName(got), actionName(want))
			}
		}
	}
	// sysinfo of the other ABIs is killed by both, never sent to the init,
	// which answers x86_64 only.
	for _, c := range []struct {
		name     string
		arch, nr uint32
	}{
		{"i386 sysinfo", auditArchI386, 116},
		{"i386 ABI, x86_64's sysinfo number", auditArchI386, 99},
		{"x32 sysinfo", auditArchX86_64, x32SyscallBit | 99},
	} {
		data := seccompData(c.arch, c.nr)
		for p, vm := range map[string]*bpf.VM{"build": plain, "buildNotifying": notifying} {
			if got := run(t, vm, data); got != killed {
				t.Errorf("%s's filter(%s) = %s, want %s", p, c.name, actionName(got), actionName(killed))
			}
		}
	}
}
