//go:build linux

package nsinit

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelSigaction is struct sigaction as the x86-64 and arm64 kernels take
// it for rt_sigaction.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const (
	sigDFL = 0
	sigIGN = 1
	// lastSignal is the highest signal number (SIGRTMAX).
	lastSignal = 64
)

func sigaction(sig int, act, old *kernelSigaction) error {
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// ignoreDefaulted ignores every signal still at its default disposition.
func ignoreDefaulted() {
	for sig := 1; sig <= lastSignal; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if sigaction(sig, nil, &old) == nil && old.handler == sigDFL {
			// sigaction(2) fails only for an invalid or uncatchable signal, which sig is not
			_ = sigaction(sig, &kernelSigaction{handler: sigIGN}, nil)
		}
	}
}

// unignoreSignals sets every signal the init inherited as ignored back to
// its default, because an ignored disposition survives exec and the
// program must start with none (whoever started warden may have ignored
// some: CI runners do). Go leaves such signals alone, and does not restore
// them in the children it forks. The returned function ignores them again
// in the init, which must call it once the program has started.
func unignoreSignals() (restore func()) {
	var ignored []int
	for sig := 1; sig <= lastSignal; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if sigaction(sig, nil, &old) != nil || old.handler != sigIGN {
			continue
		}
		if sigaction(sig, &kernelSigaction{handler: sigDFL}, nil) == nil {
			ignored = append(ignored, sig)
		}
	}
	return func() {
		for _, sig := range ignored {
			// cannot fail: sig is valid and catchable
			_ = sigaction(sig, &kernelSigaction{handler: sigIGN}, nil)
		}
	}
}
