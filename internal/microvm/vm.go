package microvm

import (
	"time"

	"github.com/warden-sandbox/warden/internal/vmguest"
)

// Boot is how long a VM took to say hello.
type Boot struct {
	// ToHello is from QEMU's start to the guest's hello, measured on the host.
	ToHello time.Duration
	// KernelToInit is the guest's own CLOCK_BOOTTIME when /init started:
	// the part of ToHello spent in the guest kernel.
	KernelToInit time.Duration
}

// guestHello turns a hello and the host's measurement into a Boot.
func guestHello(h vmguest.Hello, toHello time.Duration) Boot {
	return Boot{ToHello: toHello, KernelToInit: h.BootTime}
}
