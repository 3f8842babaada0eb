package microvm

import (
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/vmkernel"
)

// GuestKernel is the guest kernel this warden boots (built by `make
// microvm-kernel` from the inputs compiled into this binary) and the
// arguments it needs under accel: one place that pairs the kernel's
// package with the launcher, for doctor, the tests and the backend. The
// caller opens the kernel with Kernel.Open, which checks the cache again
// on the way, and starts VMs with that descriptor as Config.KernelFile.
// Under TCG the host's TSC frequency must be known (vmkernel.HostTSCKHz),
// since a boot without it hung about one time in four: without it the
// kernel is refused with ErrTSCUnknown; under KVM, kvmclock needs no
// timing arguments.
func GuestKernel(accel Accel) (vmkernel.Kernel, []string, error) {
	k, err := vmkernel.Find()
	if err != nil {
		return vmkernel.Kernel{}, nil, err
	}
	if accel != TCG {
		return k, vmkernel.BootArgs(0, false), nil
	}
	khz, err := vmkernel.HostTSCKHz()
	if err != nil {
		return vmkernel.Kernel{}, nil, fmt.Errorf("%w: %w", ErrTSCUnknown, err)
	}
	return k, vmkernel.BootArgs(khz, true), nil
}

// ErrTSCUnknown is GuestKernel's error under TCG on a host whose TSC
// frequency cannot be read with confidence (no hypervisor flag, or a
// bare-metal clock that frequency scaling moves): no build of the kernel
// helps there, a host with usable KVM does.
var ErrTSCUnknown = errors.New("booting the guest kernel under TCG needs the host's TSC frequency, which this host does not give reliably")
