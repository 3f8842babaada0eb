package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestABIConstants checks the values this package spells out (so the filter
// builds the same on every GOOS and GOARCH) against x/sys/unix for
// linux/amd64, the ABI the filter is written for.
func TestABIConstants(t *testing.T) {
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"AUDIT_ARCH_X86_64", auditArchX86_64, unix.AUDIT_ARCH_X86_64},
		{"AUDIT_ARCH_I386", auditArchI386, unix.AUDIT_ARCH_I386},
		{"SECCOMP_RET_KILL_PROCESS", retKillProcess, unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", retErrno, unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", retAllow, unix.SECCOMP_RET_ALLOW},
		{"EPERM", eperm, uint64(unix.EPERM)},
		{"ENOSYS", enosys, uint64(unix.ENOSYS)},
		{"TIOCSTI", tiocsti, unix.TIOCSTI},
		{"TIOCLINUX", tioclinux, unix.TIOCLINUX},
		{"F_SETLEASE", fSetlease, unix.F_SETLEASE},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"NETLINK_ROUTE", netlinkRoute, unix.NETLINK_ROUTE},
		{"IPPROTO_IP", ipprotoIP, unix.IPPROTO_IP},
		{"IPPROTO_ICMP", ipprotoICMP, unix.IPPROTO_ICMP},
		{"IPPROTO_TCP", ipprotoTCP, unix.IPPROTO_TCP},
		{"IPPROTO_UDP", ipprotoUDP, unix.IPPROTO_UDP},
		{"IPPROTO_ICMPV6", ipprotoICMPv6, unix.IPPROTO_ICMPV6},
		{"S_ISUID|S_ISGID", setIDBits, unix.S_ISUID | unix.S_ISGID},
		{"namespace clone flags", cloneNamespaceFlags, unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}

// TestProgramEncodes checks that Program returns a filter of build's length
// (TestProgramUpToDate compares them in full) and that callers get their own
// copy of the precompiled program.
func TestProgramEncodes(t *testing.T) {
	insns, err := build()
	if err != nil {
		t.Fatalf("build() error: %v", err)
	}
	prog, err := Program()
	if err != nil {
		t.Fatalf("Program() error: %v", err)
	}
	if got, want := len(prog), len(insns); got != want {
		t.Fatalf("Program() has %d instructions, want %d", got, want)
	}
	prog[0].K ^= 1
	again, err := Program()
	if err != nil {
		t.Fatalf("Program() second call error: %v", err)
	}
	if again[0].K == prog[0].K {
		t.Errorf("Program() returned a shared slice; modifying one result changed the next")
	}
}
