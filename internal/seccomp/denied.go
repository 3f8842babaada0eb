package seccomp

// Denied lists syscalls that must never be allowed, whatever Docker's
// profile says in a later version. None of them is in the policy's
// allowlist (build refuses to compile the filter otherwise and a test
// checks it), so they fail with the default EPERM; the list exists to make
// that a checked promise rather than an accident of what the generator
// copied. It is the one never-allow list of the project: the microVM
// backend's filter for QEMU refuses each of them too (by DeniedNumbers,
// generated from it), so the two cannot disagree. Names are x86_64
// syscall names.
var Denied = []string{
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
