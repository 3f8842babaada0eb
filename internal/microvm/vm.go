package microvm

import (
	"log/slog"
	"time"

	"github.com/warden-sandbox/warden/internal/vmguest"
)

// Boot is how long a VM took to say hello.
type Boot struct {
	// ToHello is from QEMU's start to the guest's hello, measured on the host.
	ToHello time.Duration
	// KernelToInit is the guest's own CLOCK_BOOTTIME when /init started:
	// the guest kernel's part, as far as its clock counts (it runs only
	// once the kernel has a clocksource; the rest of ToHello is QEMU's
	// start and that early boot).
	KernelToInit time.Duration
	// InitToHello is /init's own part: from its start to sending the hello.
	InitToHello time.Duration
}

// guestHello turns a hello and the host's measurement into a Boot.
func guestHello(h vmguest.Hello, toHello time.Duration) Boot {
	return Boot{ToHello: toHello, KernelToInit: h.BootTime, InitToHello: h.HelloTime - h.BootTime}
}

// warn logs a cleanup failure, which nobody waits on but must not be
// dropped.
func warn(what string, err error) {
	if err != nil {
		slog.Warn("microvm: "+what, "err", err)
	}
}
