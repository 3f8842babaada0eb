package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// Program returns the filter for linux/amd64 that InstallOnThread loads
// (InstallNotifying's differs only in the syscalls the init answers), ready for
// seccomp(SECCOMP_SET_MODE_FILTER). The filter is compiled from the policy
// at development time into zprogram_linux.go, so this only copies it; each
// call returns a fresh copy so no caller can alter what InstallOnThread
// loads. On other architectures it returns an error wrapping
// errors.ErrUnsupported, because the filter is written for the x86_64
// syscall table and would kill every process elsewhere.
func Program() ([]unix.SockFilter, error) {
	if err := checkArch(); err != nil {
		return nil, err
	}
	return slices.Clone(program[:]), nil
}

// NotifyingProgram returns a fresh copy of the filter InstallNotifying
// loads (native and Docker boxes), for an executor that installs it
// itself: warden-exec, which gets it in its plan's Seccomp op. Other
// architectures get Program's error.
func NotifyingProgram() ([]unix.SockFilter, error) {
	if err := checkArch(); err != nil {
		return nil, err
	}
	return slices.Clone(programNotifying[:]), nil
}

// NotifyingLen is the length in instructions of the filter that
// InstallNotifying loads (native and Docker boxes), for doctor's report.
func NotifyingLen() int {
	return len(programNotifying)
}

// checkArch refuses every GOARCH but amd64 (see Program).
func checkArch() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("seccomp filter for GOARCH %s: %w", runtime.GOARCH, errors.ErrUnsupported)
	}
	return nil
}

// The kernel refuses classic BPF programs longer than BPF_MAXINSNS (4096)
// instructions, and sock_fprog counts them in a uint16: a program that
// outgrew either would not compile.
var (
	_ [4096 - len(program)]struct{}
	_ [4096 - len(programNotifying)]struct{}
)
