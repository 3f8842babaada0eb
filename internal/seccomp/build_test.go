package seccomp

import (
	"fmt"
	"maps"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// Layout of struct seccomp_data (include/uapi/linux/seccomp.h): the filter
// sees the syscall number, the audit architecture and six 64-bit arguments.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Seccomp ABI values, spelled out so this file builds on every GOOS; a Linux
// test checks them against x/sys/unix.
const (
	auditArchX86_64 = 0xC000003E // AUDIT_ARCH_X86_64
	x32SyscallBit   = 0x40000000 // __X32_SYSCALL_BIT: x32 ABI syscall numbers

	retKillProcess = 0x80000000 // SECCOMP_RET_KILL_PROCESS
	retErrno       = 0x00050000 // SECCOMP_RET_ERRNO; the low 16 bits are the errno
	retAllow       = 0x7FFF0000 // SECCOMP_RET_ALLOW
	retUserNotif   = 0x7FC00000 // SECCOMP_RET_USER_NOTIF

	eperm  = 1  // EPERM on Linux
	enosys = 38 // ENOSYS on Linux
)

// argLow returns the offset of the low 32 bits of syscall argument i. The
// kernel passes each argument as a u64; on little-endian x86_64 the low word
// comes first. Rules on int arguments (and on ioctl's unsigned int cmd)
// compare only this word, because the kernel truncates those arguments to 32
// bits: comparing all 64 would let 0xFFFFFFFF00005412 slip past a TIOCSTI
// check and still be TIOCSTI to the kernel.
func argLow(i uint32) uint32 { return offArgs + 8*i }

// argHigh returns the offset of the high 32 bits of syscall argument i.
// Only a test on a pointer reads it: the kernel uses all 64 bits of a
// pointer, so a NULL test on the low word alone would take 0x100000000 for
// NULL.
func argHigh(i uint32) uint32 { return argLow(i) + 4 }

// build assembles the whole filter from the policy, with the syscalls in
// notified allowed: the program for gVisor, whose kernel answers them
// with the box's own figures. It and buildNotifying are the source of
// truth for the programs Warden installs: TestGenerateProgram writes their
// output to zprogram_linux.go and TestProgramUpToDate fails while that file
// differs. It is pure data processing, so tests can run it in a BPF emulator
// without privileges.
func build() ([]bpf.Instruction, error) {
	a, err := buildAsm(false)
	if err != nil {
		return nil, err
	}
	return a.prog, nil
}

// buildNotifying is build with the syscalls in notified sent to the
// init's listener instead: the program for native and Docker boxes, whose
// kernel is the host's. Every other syscall gets the same answer.
func buildNotifying() ([]bpf.Instruction, error) {
	a, err := buildAsm(true)
	if err != nil {
		return nil, err
	}
	return a.prog, nil
}

// buildListing is build (or with notify, buildNotifying) that also
// describes each instruction in a few words (see asm.listing).
func buildListing(notify bool) ([]bpf.Instruction, []string, error) {
	a, err := buildAsm(notify)
	if err != nil {
		return nil, nil, err
	}
	return a.prog, a.listing(), nil
}

// buildAsm runs the rules and returns the assembled program; notify
// sends the syscalls in notified to the init (notifyRule).
func buildAsm(notify bool) (*asm, error) {
	nr, err := resolve()
	if err != nil {
		return nil, fmt.Errorf("resolving syscall names: %w", err)
	}
	if err := checkDisjoint(); err != nil {
		return nil, fmt.Errorf("checking policy: %w", err)
	}
	if err := checkModeArgsRuled(); err != nil {
		return nil, fmt.Errorf("checking policy: %w", err)
	}
	if err := checkNotifiedAllowed(); err != nil {
		return nil, fmt.Errorf("checking policy: %w", err)
	}

	// Every rule is entered only once the syscall number has matched, and
	// only then loads an argument, so a syscall without a rule gets its
	// answer from the number alone and the kernel's per-syscall action
	// cache still covers it wherever it sits. The order therefore matters
	// only for ruled syscalls, whose answer is never cached: the busiest of
	// them (openat, open) are checked first.
	var a asm
	checkABI(&a)
	setIDRules(&a, nr)
	openat2Rule(&a, nr)
	cloneRules(&a, nr)
	ioctlRule(&a, nr)
	fcntlRule(&a, nr)
	socketRule(&a, nr)
	prlimitRule(&a, nr)
	personalityRule(&a, nr)
	if notify {
		notifyRule(&a, nr)
	}
	allowRules(&a, nr)
	// Default: anything not allowed above, including every name in Denied,
	// fails with EPERM, which programs treat as an ordinary refusal.
	a.ret(retErrno | eperm)

	if _, err := a.assemble(); err != nil {
		return nil, fmt.Errorf("assembling filter: %w", err)
	}
	return &a, nil
}

// checkABI kills the process for any syscall not made through the native
// x86_64 ABI. seccomp_data.nr means something different under each ABI, so a
// filter written for one table would let i386 (int 0x80) or x32 numbers
// through under the wrong names. Killing rather than EPERM makes such an
// attempt loud; nothing the sandbox runs uses these ABIs. The x32 test is on
// bit 30 alone, as the kernel's own dispatch is, so it also kills the
// out-of-range number -1, which only a tracer uses to skip a syscall (and
// ptrace is denied).
func checkABI(a *asm) {
	a.load(offArch)
	a.jump("arch == AUDIT_ARCH_X86_64", bpf.JumpEqual, auditArchX86_64, "abi.arch-ok", "")
	a.ret(retKillProcess)
	a.label("abi.arch-ok")

	a.load(offNr)
	a.jump("nr & __X32_SYSCALL_BIT", bpf.JumpBitsSet, x32SyscallBit, "", "abi.ok")
	a.ret(retKillProcess)
	a.label("abi.ok")
}

// setIDRules refuses with EPERM any call that would give a file the
// set-user-ID or set-group-ID bit, and allows the same syscalls otherwise.
// The sandbox writes into host directories through idmapped mounts, where
// its files land on disk owned by the directory's owner, possibly host root:
// a set-id file made there would be a set-uid-root binary on the host.
//
// Each syscall in modeArgs jumps to a block that tests the low word of its
// mode argument. mode_t is 32 bits and the kernel narrows it further to a
// 16-bit umode_t, so a set-id bit in the high word never reaches an inode.
// Syscalls sharing a mode argument index share the block.
//
// open and openat ignore mode unless flags hold O_CREAT or O_TMPFILE. The
// rule does not look at flags: a stray set-id bit in an unused mode is
// refused too, which no real caller trips over (they pass 0 or 0666-style
// modes), and in return the check is one load and one test, with O_TMPFILE
// covered for free.
//
// Because openat and open come first, openat's allowed path costs eight
// instructions: four for checkABI, then match, load, test and allow.
func setIDRules(a *asm, nr map[string]uint32) {
	var blocks []uint32 // argument indices, in order of first use
	for i, m := range modeArgs {
		jf := ""
		if i == len(modeArgs)-1 {
			jf = "setid.next"
		}
		a.jump("nr == "+m.name, bpf.JumpEqual, nr[m.name], modeLabel(m.arg), jf)
		if !slices.Contains(blocks, m.arg) {
			blocks = append(blocks, m.arg)
		}
	}
	for _, arg := range blocks {
		a.label(modeLabel(arg))
		a.load(argLow(arg))
		a.jump(fmt.Sprintf("args[%d] & (S_ISUID|S_ISGID)", arg), bpf.JumpBitsSet, setIDBits, "setid.deny", "setid.allow")
	}
	a.verdicts("setid")
	a.label("setid.next")
}

// modeLabel names the block of setIDRules that tests argument arg.
func modeLabel(arg uint32) string { return fmt.Sprintf("setid.arg%d", arg) }

// openat2Rule answers openat2 with ENOSYS. Its mode lives in a struct
// open_how in memory that seccomp cannot read, so setIDRules cannot apply;
// on ENOSYS, glibc, CPython and the like fall back to openat, which it can.
func openat2Rule(a *asm, nr map[string]uint32) {
	a.jump("nr == openat2", bpf.JumpEqual, nr["openat2"], "", "openat2.next")
	a.ret(retErrno | enosys)
	a.label("openat2.next")
}

// cloneRules allows clone only without namespace flags: a new user
// namespace gives its creator every capability over objects it owns, which
// turns unprivileged kernel bugs into reachable ones. Threads, fork, vfork
// and Go's os/exec (CLONE_VFORK|CLONE_VM|CLONE_PIDFD|SIGCHLD) stay allowed.
// The kernel reads clone's flags through lower_32_bits(), so only the low
// word is tested.
//
// clone3 passes its flags in memory that seccomp cannot read, so it is
// answered with ENOSYS, which makes glibc and Go fall back to clone. (Go
// itself uses clone3 only for CLONE_INTO_CGROUP or CLONE_NEWTIME, which the
// sandbox does not ask for after the filter is on.)
//
// Entering the block reloads A, so each block ends in returns and the
// non-matching path jumps past it with the syscall number still in A.
func cloneRules(a *asm, nr map[string]uint32) {
	a.jump("nr == clone", bpf.JumpEqual, nr["clone"], "", "clone.next")
	a.load(argLow(0))
	a.jump("args[0] & CLONE_NEW*", bpf.JumpBitsSet, cloneNamespaceFlags, "clone.deny", "")
	a.ret(retAllow)
	a.label("clone.deny")
	a.ret(retErrno | eperm)
	a.label("clone.next")

	a.jump("nr == clone3", bpf.JumpEqual, nr["clone3"], "", "clone3.next")
	a.ret(retErrno | enosys)
	a.label("clone3.next")
}

// ioctlRule allows ioctl except TIOCSTI and TIOCLINUX, the two requests that
// inject input into a terminal another process reads. cmd is an unsigned
// int in the kernel, so the low word decides whatever the high word holds.
func ioctlRule(a *asm, nr map[string]uint32) {
	a.jump("nr == ioctl", bpf.JumpEqual, nr["ioctl"], "", "ioctl.next")
	a.load(argLow(1))
	a.jump("args[1] == TIOCSTI", bpf.JumpEqual, tiocsti, "ioctl.deny", "")
	a.jump("args[1] == TIOCLINUX", bpf.JumpEqual, tioclinux, "ioctl.deny", "")
	a.ret(retAllow)
	a.label("ioctl.deny")
	a.ret(retErrno | eperm)
	a.label("ioctl.next")
}

// fcntlRule allows fcntl except F_SETLEASE, with which a sandboxed process
// could make every other opener of its files, the host included, wait for
// the lease-break time. cmd is an unsigned int in the kernel, so the low
// word decides whatever the high word holds.
func fcntlRule(a *asm, nr map[string]uint32) {
	a.jump("nr == fcntl", bpf.JumpEqual, nr["fcntl"], "", "fcntl.next")
	a.load(argLow(1))
	a.jump("args[1] == F_SETLEASE", bpf.JumpEqual, fSetlease, "", "fcntl.allow")
	a.ret(retErrno | eperm)
	a.label("fcntl.allow")
	a.ret(retAllow)
	a.label("fcntl.next")
}

// socketRule allows socket and socketpair for AF_UNIX with any protocol
// (the kernel accepts only 0), AF_INET and AF_INET6 with the protocols in
// inetProtocols, which keeps unprivileged callers from making the kernel
// load protocol modules, and AF_NETLINK only with NETLINK_ROUTE. Every
// other family (AF_PACKET, AF_ALG, AF_VSOCK, ...) is rarely needed and is
// where socket-layer kernel bugs keep turning up. Domain and protocol are
// ints: low words only.
func socketRule(a *asm, nr map[string]uint32) {
	a.jump("nr == socket", bpf.JumpEqual, nr["socket"], "socket", "")
	a.jump("nr == socketpair", bpf.JumpEqual, nr["socketpair"], "", "socket.next")
	a.label("socket")
	a.load(argLow(0)) // domain
	a.jump("args[0] == AF_UNIX", bpf.JumpEqual, afUnix, "socket.allow", "")
	a.jump("args[0] == AF_INET", bpf.JumpEqual, afInet, "socket.inet", "")
	a.jump("args[0] == AF_INET6", bpf.JumpEqual, afInet6, "socket.inet", "")
	a.jump("args[0] == AF_NETLINK", bpf.JumpEqual, afNetlink, "", "socket.deny")
	a.load(argLow(2)) // protocol
	a.jump("args[2] == NETLINK_ROUTE", bpf.JumpEqual, netlinkRoute, "socket.allow", "socket.deny")
	a.label("socket.inet")
	a.load(argLow(2)) // protocol
	a.oneOf("args[2]", inetProtocols, "socket.allow", "socket.deny")
	a.verdicts("socket")
	a.label("socket.next")
}

// prlimitRule refuses prlimit64 calls that would change another process's
// resource limits: pid (a pid_t, so its low word) not 0 and new_limit (a
// pointer, so both words) not NULL. In rootless mode the program shares its
// uid with the sandbox's init, PID 1, which the kernel's own check
// (same uid, or CAP_SYS_RESOURCE) would then let it cripple, say by
// lowering RLIMIT_NOFILE or RLIMIT_NPROC under it.
//
// prlimit64(0, ...), which glibc's getrlimit and setrlimit and Go's
// syscall package use, stays allowed, and so does reading any process's
// limits (new_limit NULL), which the kernel checks as it would without the
// filter. A process that names itself by its pid to change its own limits
// is refused too, since the filter cannot know the caller's pid; nothing
// common does that, and the same call with pid 0 works.
func prlimitRule(a *asm, nr map[string]uint32) {
	a.jump("nr == prlimit64", bpf.JumpEqual, nr["prlimit64"], "", "prlimit.next")
	a.load(argLow(0)) // pid
	a.jump("args[0] == 0", bpf.JumpEqual, 0, "prlimit.allow", "")
	a.load(argLow(2)) // new_limit
	a.jump("args[2] == 0", bpf.JumpEqual, 0, "", "prlimit.deny")
	a.load(argHigh(2))
	a.jump("args[2] >> 32 == 0", bpf.JumpEqual, 0, "prlimit.allow", "prlimit.deny")
	a.verdicts("prlimit")
	a.label("prlimit.next")
}

// personalityRule allows personality only for the values in personas,
// Docker's: the query and the personas that change what uname reports.
// Refusing every call broke programs that merely query their persona.
func personalityRule(a *asm, nr map[string]uint32) {
	a.jump("nr == personality", bpf.JumpEqual, nr["personality"], "", "personality.next")
	a.load(argLow(0)) // persona
	a.oneOf("args[0]", personas, "personality.allow", "personality.deny")
	a.verdicts("personality")
	a.label("personality.next")
}

// notifyRule sends every syscall in notified to the init's listener. It
// sits after the argument rules, so the busiest ruled calls (openat,
// open) pay nothing for it, and before allowRules, where the same numbers
// are allowed. It reads no argument, and the kernel's action cache keeps
// only allowed numbers, so allowed calls still skip the program entirely.
func notifyRule(a *asm, nr map[string]uint32) {
	for i, name := range notified {
		jf := ""
		if i == len(notified)-1 {
			jf = "notify.next"
		}
		a.jump("nr == "+name, bpf.JumpEqual, nr[name], "notify", jf)
	}
	a.label("notify")
	a.ret(retUserNotif)
	a.label("notify.next")
}

// allowRules allows every syscall in allowlist unconditionally. The
// allowed numbers fall into a few dozen runs of consecutive numbers, which
// are searched as a balanced binary tree: a number walks through about a
// dozen instructions rather than up to one per allowed syscall. The
// answer depends on the number alone, so kernels since 5.11 cache it per
// syscall and never run this part again for an allowed call; but they
// fill that cache by running the filter once for every syscall number
// when it is installed, once per sandbox, and a list of ~300 comparisons
// made that the costliest part of installing it.
func allowRules(a *asm, nr map[string]uint32) {
	searchRuns(a, allowedRuns(nr), 0, "allow.yes", "allow.no")
	a.label("allow.yes")
	a.ret(retAllow)
	a.label("allow.no")
}

// numRun is a range of consecutive syscall numbers, every one allowlisted.
type numRun struct {
	lo, hi         uint32
	loName, hiName string
}

// allowedRuns are the allowlist's numbers as maximal runs, in order.
func allowedRuns(nr map[string]uint32) []numRun {
	names := make(map[uint32]string, len(allowlist))
	for _, name := range allowlist {
		names[nr[name]] = name
	}
	nums := slices.Sorted(maps.Keys(names))
	var runs []numRun
	for _, n := range nums {
		if last := len(runs) - 1; last >= 0 && runs[last].hi+1 == n {
			runs[last].hi, runs[last].hiName = n, names[n]
			continue
		}
		runs = append(runs, numRun{lo: n, hi: n, loName: names[n], hiName: names[n]})
	}
	return runs
}

// searchRuns continues at yes if nr lies in one of runs, else at no,
// halving runs at each comparison. floor is the least nr can be on this
// path, which spares a leaf's lower-bound test where the split made it.
func searchRuns(a *asm, runs []numRun, floor uint32, yes, no string) {
	if len(runs) == 1 {
		r := runs[0]
		switch {
		case r.lo == r.hi && floor < r.lo:
			a.jump("nr == "+r.loName, bpf.JumpEqual, r.lo, yes, no)
			return
		case floor < r.lo:
			a.jump("nr >= "+r.loName, bpf.JumpGreaterOrEqual, r.lo, "", no)
		}
		a.jump("nr > "+r.hiName, bpf.JumpGreaterThan, r.hi, no, yes)
		return
	}
	mid := len(runs) / 2
	upper := fmt.Sprintf("allow.from.%d", runs[mid].lo)
	a.jump("nr >= "+runs[mid].loName, bpf.JumpGreaterOrEqual, runs[mid].lo, upper, "")
	searchRuns(a, runs[:mid], floor, yes, no)
	a.label(upper)
	searchRuns(a, runs[mid:], runs[mid].lo, yes, no)
}

// resolve maps every name the policy mentions to its x86_64 syscall number,
// using go-seccomp-bpf's table (generated from the kernel's syscall_64.tbl).
// An unknown name is an error, so a typo in Denied is caught as surely as
// one in allowlist.
func resolve() (map[string]uint32, error) {
	nr := make(map[string]uint32)
	for _, list := range [][]string{allowlist, ruled, Denied} {
		for _, name := range list {
			n, ok := arch.X86_64.SyscallNames[name]
			if !ok {
				return nil, fmt.Errorf("unknown x86_64 syscall %q", name)
			}
			nr[name] = uint32(n)
		}
	}
	return nr, nil
}

// checkDisjoint makes sure the allowlist neither allows a denied syscall nor
// shadows one that has its own rule.
func checkDisjoint() error {
	for _, name := range allowlist {
		if slices.Contains(Denied, name) {
			return fmt.Errorf("syscall %q is both allowed and denied", name)
		}
		if slices.Contains(ruled, name) {
			return fmt.Errorf("syscall %q is in the allowlist but has its own rule", name)
		}
	}
	return nil
}

// checkNotifiedAllowed makes sure every syscall notifyRule sends to the
// init is allowed where the kernel answers it (build's program) and has
// no rule of its own, which notifyRule would bypass.
func checkNotifiedAllowed() error {
	for _, name := range notified {
		if !slices.Contains(allowlist, name) {
			return fmt.Errorf("syscall %q is notified but not in the allowlist", name)
		}
	}
	return nil
}

// checkModeArgsRuled makes sure every syscall setIDRules checks is in ruled,
// so resolve knows its number and the allowlist cannot also hold it.
func checkModeArgsRuled() error {
	for _, m := range modeArgs {
		if !slices.Contains(ruled, m.name) {
			return fmt.Errorf("syscall %q has a mode rule but is not in ruled", m.name)
		}
	}
	return nil
}
