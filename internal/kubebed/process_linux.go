//go:build linux

package kubebed

import "syscall"

// processesSupported: Linux has what the bed's processes need.
func processesSupported() error { return nil }

// processGroup puts a child in its own process group, so that stopping it
// also stops anything it started, and kills it if the test process dies
// without its cleanup running.
func processGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
