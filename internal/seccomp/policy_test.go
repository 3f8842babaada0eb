package seccomp

// The policy lives in test files with the compiler that turns it into BPF
// (build_test.go): Warden itself carries only the compiled program,
// zprogram_linux.go, which TestGenerateProgram writes and
// TestProgramUpToDate keeps in step with this file, allowlist_test.go and
// denied.go (Denied, the one list in a non-test file: QEMU's filter uses
// it too).

// ruled lists syscalls that have their own argument rule in the program
// (see build_test.go). They must not be in allowlist, where an unconditional
// allow would make the rule unreachable. Every name in modeArgs must be here
// too (build checks it), which also keeps the generator from copying them
// back into allowlist.
var ruled = []string{
	"chmod",
	"clone",
	"clone3",
	"creat",
	"fchmod",
	"fchmodat",
	"fchmodat2",
	"fcntl",
	"ioctl",
	"mknod",
	"mknodat",
	"open",
	"openat",
	"openat2",
	"personality",
	"prlimit64",
	"socket",
	"socketpair",
}

// notified lists the syscalls that the sandbox's init answers itself in
// the program for boxes whose kernel is the host's (native, Docker):
// buildNotifying sends them to the init as seccomp user notifications
// (SECCOMP_RET_USER_NOTIF), and the init writes the sandbox's own answer
// (internal/nsinit, sysinfo_linux.go). sysinfo(2) would otherwise tell
// the sandbox the host's memory, swap, load, uptime and process count,
// which glibc's sysconf(_SC_PHYS_PAGES), Python's os.sysconf and
// Node's os.totalmem read. Each must also be in allowlist (build checks
// it): the program for gVisor, whose kernel answers with the box's own
// figures, allows them as Docker's profile does.
var notified = []string{
	"sysinfo",
}

// modeArgs lists every syscall that stores a caller-chosen mode on an inode
// it creates or changes, with the index of that mode argument, for
// setIDRules. mkdir and mkdirat are absent on purpose: set-group-ID on a
// directory only makes new entries inherit its group, and set-user-ID on a
// directory means nothing. The order is the order of the checks, busiest
// syscall first, since this rule runs on every call of these syscalls.
var modeArgs = []struct {
	name string
	arg  uint32
}{
	{"openat", 3},    // openat(dfd, path, flags, mode)
	{"open", 2},      // open(path, flags, mode)
	{"fchmod", 1},    // fchmod(fd, mode)
	{"fchmodat", 2},  // fchmodat(dfd, path, mode)
	{"chmod", 1},     // chmod(path, mode)
	{"creat", 1},     // creat(path, mode)
	{"fchmodat2", 2}, // fchmodat2(dfd, path, mode, flags)
	{"mknodat", 2},   // mknodat(dfd, path, mode, dev)
	{"mknod", 1},     // mknod(path, mode, dev)
}

// Argument values the rules compare against. They are spelled out rather
// than taken from x/sys/unix because the filter is for the x86_64 ABI
// whatever GOARCH builds it, and unix's values follow GOARCH.
const (
	// cloneNamespaceFlags is CLONE_NEWNS|CLONE_NEWCGROUP|CLONE_NEWUTS|
	// CLONE_NEWIPC|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET, the mask Docker
	// uses: clone with any of them would create a namespace.
	cloneNamespaceFlags = 0x7E020000

	// tiocsti pushes bytes into a terminal's input queue, so a sandboxed
	// process holding a tty fd could type commands into the user's shell.
	tiocsti = 0x5412
	// tioclinux has subcommands that copy and paste console selections,
	// the same injection through the Linux virtual console.
	tioclinux = 0x541C

	// fSetlease (F_SETLEASE) takes a lease on a file the caller owns: while
	// a write lease is held, another process's open of the file waits up to
	// fs.lease-break-time (45 s by default), the host's reads of the
	// workspace and any other reader of the file among them.
	fSetlease = 1024

	afUnix    = 1  // AF_UNIX: local IPC, needed by many runtimes.
	afInet    = 2  // AF_INET: networking (policy is enforced by the netns).
	afInet6   = 10 // AF_INET6: as AF_INET.
	afNetlink = 16 // AF_NETLINK: only with netlinkRoute, see below.

	// netlinkRoute (NETLINK_ROUTE) is what getifaddrs and resolvers use to
	// list interfaces; other netlink families (audit, netfilter, uevents,
	// ...) reach host-wide kernel subsystems.
	netlinkRoute = 0

	// Protocols of AF_INET and AF_INET6 sockets, see inetProtocols.
	ipprotoIP     = 0  // IPPROTO_IP: the type's default, TCP or UDP
	ipprotoICMP   = 1  // IPPROTO_ICMP: ICMP echo ("ping") sockets
	ipprotoTCP    = 6  // IPPROTO_TCP
	ipprotoUDP    = 17 // IPPROTO_UDP
	ipprotoICMPv6 = 58 // IPPROTO_ICMPV6: ICMPv6 echo sockets

	// Personas, see personas. x/sys/unix does not define them; the values
	// are include/uapi/linux/personality.h's, and TestPersonasMatchDocker
	// checks the set against Docker's profile.
	perLinux     = 0x0000000  // PER_LINUX: the default persona
	perLinux32   = 0x0000008  // PER_LINUX32: uname reports a 32-bit machine
	uname26      = 0x0020000  // UNAME26: uname reports a 2.6.x kernel release
	personaQuery = 0xFFFFFFFF // not a persona: reads the current one, changes nothing

	// setIDBits is S_ISUID|S_ISGID (04000|02000). A file carrying either
	// runs with its owner's or group's identity, whoever executes it.
	setIDBits = 0o6000
)

// inetProtocols lists the protocols socket and socketpair accept for AF_INET
// and AF_INET6, busiest first, since socketRule tests them in this order.
//
// Naming a protocol the kernel has not registered makes it load the module
// that provides it (the alias net-pf-2-proto-132 for SCTP over IPv4), on
// behalf of an unprivileged caller, on any host that ships one. SCTP, DCCP,
// L2TP and the like are large, rarely exercised, and a recurring source of
// kernel privilege escalations that become reachable this way; nothing a
// sandboxed program runs needs them.
//
// Left out on purpose, each failing with EPERM:
//   - IPPROTO_UDPLITE (136): deprecated by the kernel, which warns on first
//     use and means to remove it; next to nothing uses it.
//   - IPPROTO_MPTCP (262): built in rather than a module, but a young,
//     complex subsystem with a steady run of memory-safety fixes. Go 1.24+
//     listeners try it by default and fall back to plain TCP on any error,
//     so refusing it costs a Go server one failed socket call per listener.
//   - SOCK_RAW protocols such as IPPROTO_RAW (255): raw sockets need
//     CAP_NET_RAW, which the sandbox lacks, so the kernel refuses them
//     anyway; the filter only refuses them first.
//
// The list is shared by both families, so AF_INET also accepts
// IPPROTO_ICMPV6 and AF_INET6 IPPROTO_ICMP: no module provides either
// pairing, so the kernel answers EPROTONOSUPPORT, and one list keeps the
// rule short.
var inetProtocols = []namedVal{
	{"IPPROTO_IP", ipprotoIP},     // socket(AF_INET, SOCK_STREAM, 0), what most callers write
	{"IPPROTO_TCP", ipprotoTCP},   // the same, spelled out
	{"IPPROTO_UDP", ipprotoUDP},   // the same for datagrams
	{"IPPROTO_ICMP", ipprotoICMP}, // unprivileged ping, where net.ipv4.ping_group_range admits the caller
	{"IPPROTO_ICMPV6", ipprotoICMPv6},
}

// namedVal is an argument value a rule allows, with the name the
// generated program's comment gives it.
type namedVal struct {
	name string
	val  uint32
}

// personas lists the values personality accepts: exactly those Docker's
// default profile allows (TestPersonasMatchDocker), the query first as the
// commonest call. PER_LINUX32 and UNAME26 only change what uname reports
// (setarch i686, linux32, and old build scripts that expect a 2.6 kernel).
// The other flags mostly change how the kernel maps the next exec'd
// program, and several weaken it: READ_IMPLIES_EXEC makes all readable
// memory executable, ADDR_NO_RANDOMIZE turns off ASLR, MMAP_PAGE_ZERO maps
// page zero, the trick behind CVE-2009-1895's null-dereference exploits.
// personality's argument is an unsigned int, so only the low word is
// compared.
var personas = []namedVal{
	{"0xffffffff (query)", personaQuery},
	{"PER_LINUX", perLinux},
	{"PER_LINUX32", perLinux32},
	{"UNAME26", uname26},
	{"PER_LINUX32|UNAME26", perLinux32 | uname26},
}
