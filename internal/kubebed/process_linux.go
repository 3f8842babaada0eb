//go:build linux

package kubebed

import (
	"fmt"
	"syscall"
)

// processesSupported: Linux has what the bed's processes need.
func processesSupported() error { return nil }

// processGroup puts a child in its own process group, so that stopping it
// also stops anything it started, and kills it if the test process dies
// without its cleanup running.
func processGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process group led by pid. A pid <= 0 is
// refused: kill(-pid) would then signal every process (-1) or the
// test's own group (0).
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return fmt.Errorf("signalling process group %d: not a started process's pid", pid)
	}
	return syscall.Kill(-pid, sig)
}
