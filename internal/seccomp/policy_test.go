package seccomp

// The policy lives in test files with the compiler that turns it into BPF
// (build_test.go): Warden itself carries only the compiled program,
// zprogram_linux.go, which TestGenerateProgram writes and
// TestProgramUpToDate keeps in step with this file and allowlist_test.go.

// denied lists syscalls that must never be allowed, whatever Docker's profile
// says in a later version. None of them is in allowlist (build refuses to
// compile the filter otherwise and a test checks it), so they fail with the
// default EPERM; the list exists to make that a checked promise rather than
// an accident of what the generator copied. Names are x86_64 syscall names.
var denied = []string{
	// io_uring executes syscall-equivalent operations that seccomp never sees
	// and has been a steady source of kernel privilege escalations.
	"io_uring_enter",
	"io_uring_register",
	"io_uring_setup",

	// userfaultfd lets a process stall the kernel mid-copy, the standard
	// tool for widening race windows in kernel exploits.
	"userfaultfd",

	// perf_event_open and bpf expose large, frequently exploited kernel
	// subsystems and side channels; unprivileged use is never needed here.
	"bpf",
	"perf_event_open",

	// Keyrings are not namespaced and have had many memory-safety bugs.
	"add_key",
	"keyctl",
	"request_key",

	// Mount and filesystem-context syscalls could rearrange the sandbox's
	// view of the filesystem (or reach host mounts) if anything let them
	// succeed; the init has already built the final root.
	"chroot",
	"fsconfig",
	"fsmount",
	"fsopen",
	"fspick",
	"mount",
	"mount_setattr",
	"move_mount",
	"open_tree",
	"open_tree_attr",
	"pivot_root",
	"umount2",

	// New namespaces (unshare, setns) are how unprivileged code gains
	// capabilities over kernel objects and reaches otherwise root-only
	// attack surface. clone is allowed separately, without namespace flags.
	"setns",
	"unshare",

	// Reading or writing other processes' memory; even inside one sandbox
	// this defeats per-process hardening and aids exploitation.
	"kcmp",
	"pidfd_getfd",
	"process_madvise",
	"process_vm_readv",
	"process_vm_writev",
	"ptrace",

	// Loading kernels or modules, rebooting, swap and process accounting
	// act on the whole host.
	"acct",
	"delete_module",
	"finit_module",
	"init_module",
	"kexec_file_load",
	"kexec_load",
	"reboot",
	"swapoff",
	"swapon",

	// Host-wide state or raw hardware access that Docker also gates behind
	// capabilities the sandbox does not have.
	"clock_settime",
	"fanotify_init",
	"ioperm",
	"iopl",
	"lookup_dcookie",
	"nfsservctl",
	"open_by_handle_at",
	"quotactl",
	"quotactl_fd",
	"setdomainname",
	"sethostname",
	"settimeofday",
	"syslog",
	"uselib",
	"vhangup",
	"_sysctl",

	// modify_ldt installs 16-bit and other custom segments, which nothing
	// the sandbox runs needs (only 16-bit code under Wine or DOSEMU does);
	// it is a classic helper in kernel exploits and the home of several
	// kernel bugs of its own.
	"modify_ldt",
}

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
	"ioctl",
	"mknod",
	"mknodat",
	"open",
	"openat",
	"openat2",
	"socket",
	"socketpair",
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

	afUnix    = 1  // AF_UNIX: local IPC, needed by many runtimes.
	afInet    = 2  // AF_INET: networking (policy is enforced by the netns).
	afInet6   = 10 // AF_INET6: as AF_INET.
	afNetlink = 16 // AF_NETLINK: only with netlinkRoute, see below.

	// netlinkRoute (NETLINK_ROUTE) is what getifaddrs and resolvers use to
	// list interfaces; other netlink families (audit, netfilter, uevents,
	// ...) reach host-wide kernel subsystems.
	netlinkRoute = 0

	// setIDBits is S_ISUID|S_ISGID (04000|02000). A file carrying either
	// runs with its owner's or group's identity, whoever executes it.
	setIDBits = 0o6000
)
