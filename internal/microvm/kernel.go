package microvm

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/vmkernel"
)

// GuestKernel is the guest kernel this warden boots (built by `make
// microvm-kernel` from the inputs compiled into this binary) and the
// arguments it needs under accel: one place that pairs the kernel's
// package with the launcher, for doctor, the tests and the backend.
// Under TCG the host's TSC frequency must be known (vmkernel.HostTSCKHz),
// since a boot without it hung about one time in four: without it the
// kernel is refused with the reason.
func GuestKernel(accel Accel) (string, []string, error) {
	k, err := vmkernel.Find()
	if err != nil {
		return "", nil, err
	}
	khz, err := vmkernel.HostTSCKHz()
	if err != nil && accel == TCG {
		return "", nil, fmt.Errorf("booting the guest kernel under TCG needs the host's TSC frequency: %w", err)
	}
	if err != nil {
		khz = 0
	}
	return k.Vmlinux, vmkernel.BootArgs(khz, accel == TCG), nil
}
