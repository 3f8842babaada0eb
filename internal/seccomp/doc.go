// Package seccomp holds Warden's syscall policy as data and the classic BPF
// seccomp filter for linux/amd64 compiled from it.
//
// The policy starts from Docker's default profile as it applies to a
// container granted no capabilities (the sandboxed process has none), keeps
// that allowlist as a static, reviewable Go file (allowlist_test.go), and
// tightens it: kernel interfaces that hostile code uses to escalate (io_uring, bpf,
// userfaultfd, keyrings, mounts, namespaces, ptrace, ...) are refused, and a
// few syscalls are allowed only for argument values a sandboxed program needs
// (clone without namespace flags, ioctl without terminal injection, fcntl
// without F_SETLEASE, whose leases make other openers of a file, the
// host's copies of the workspace among them, wait 45 s, sockets
// of the ordinary families and, for IP, the ordinary protocols, so that no
// call makes the kernel load a protocol module, personality only for
// Docker's personas, prlimit64 without changing another process's limits,
// file modes without set-user-ID or set-group-ID, which would otherwise
// outlive the sandbox as set-id binaries in host directories it writes to).
// Anything not allowed fails with EPERM, which
// programs handle as "not permitted" rather than crashing; calls from another
// ABI (i386 via int 0x80, x32) kill the process, because nothing in the
// sandbox legitimately uses them and they are the classic way around a
// filter written for one syscall table.
//
// The policy (policy_test.go, allowlist_test.go) and the assembler that
// compiles it (build_test.go, assembler_test.go) build only into the tests,
// except Denied (denied.go), the never-allow list, which the microVM
// backend's filter for QEMU refuses too. Their output is checked in as
// zprogram_linux.go: the two programs below (Program returns the first),
// Notified, the numbers of the syscalls the init answers, and
// DeniedNumbers and HighestNumber, for QEMU's filter, so starting a
// sandbox or a VM resolves no syscall names and assembles nothing. After editing the policy,
// regenerate it with
//
//	go test ./internal/seccomp -run TestGenerateProgram -update
//
// which the tests demand (TestProgramUpToDate) until it is done.
//
// The policy compiles to two programs that differ in one respect: the
// syscalls the sandbox's init answers itself (sysinfo, which would
// otherwise show the host's memory, load, uptime and process count).
// InstallNotifying loads the one that sends them to a listener it returns
// (SECCOMP_RET_USER_NOTIF), for boxes whose kernel is the host's;
// InstallOnThread the one that allows them, for gVisor, whose kernel
// answers them with the box's own figures.
//
// The filter is installed on the calling thread only (no TSYNC): the sandbox
// init installs it on a locked thread and then forks and execs the user's
// program from that thread, so the program and all its descendants inherit
// it while the rest of the init keeps running unfiltered. warden-exec, the
// C executor of one-shot boxes, gets the notifying program in its plan
// (NotifyingProgram) and has one thread: its PID 1 installs the filter on
// itself before forking the program, so PID 1 runs under the filter too
// while it answers the program's calls on the listener.
package seccomp
