package doctor

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/vmkernel"
)

// microVMKernel finds the microVM guest kernel this warden boots and its
// arguments under accel, or says why there is none in one line
// (microvm.GuestKernel; a variable for tests).
var microVMKernel = microvm.GuestKernel

// microVMConfinement says why QEMU cannot be confined here, or nil
// (microvm.CheckConfinement; a variable for tests).
var microVMConfinement = microvm.CheckConfinement

// microVMCheck reports what the microVM launcher would use here: QEMU, the
// accelerator and why, and the guest kernel. MicroVMs are optional, so a
// gap is a warning.
func microVMCheck(ctx context.Context) Check {
	c := Check{Name: "microvm", Status: OK}
	accel := microvm.HostAccel()
	version, err := microvm.QEMUVersion(ctx, "")
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		c.Fix = "apt-get install qemu-system-x86"
		return c
	}
	if err := microVMConfinement(); err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s, but QEMU cannot be confined here, so no microVM starts: %v", version, err)
		c.Fix = "run warden as root on an amd64 host with Linux 5.12 or newer"
		return c
	}
	kernel, _, err := microVMKernel(accel.Accel)
	if err == nil {
		err = kernelSource(kernel)
	}
	if err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s, accel %s (%s); guest kernel: %v", version, accel.Accel, accel.Reason, err)
		c.Fix = "make microvm-kernel"
		if errors.Is(err, microvm.ErrTSCUnknown) {
			c.Fix = "run microVMs on a host with usable KVM (vmx or svm in /proc/cpuinfo and /dev/kvm), or on a VM host whose TSC rate /proc/cpuinfo gives (flags hypervisor, constant_tsc, tsc_known_freq)"
		}
		return c
	}
	c.Detail = fmt.Sprintf("%s, accel %s (%s); guest kernel %s", version, accel.Accel, accel.Reason, kernel.Vmlinux)
	return c
}

// kernelSource says when k was built from another linux-source than the
// one installed now (a security update since the build), which `make
// microvm-kernel` rebuilds; nil when they match or cannot be compared (no
// linux-source installed). A variable for tests.
var kernelSource = func(k vmkernel.Kernel) error {
	if err := vmkernel.CheckSource(k); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// MicroVMBoot boots one microVM with init (a static warden-init) as the
// guest's /init and reports the boot-to-hello time and where it went:
// the proof, beyond microVMCheck's inventory, that a VM boots here.
func MicroVMBoot(ctx context.Context, init string) Check {
	c := Check{Name: "microvm boot", Status: Warn, Fix: "make microvm-kernel; apt-get install qemu-system-x86; run as root"}
	kernel, args, err := microVMKernel(microvm.HostAccel().Accel)
	if err != nil {
		c.Detail = "guest kernel: " + err.Error()
		return c
	}
	vmlinux, err := kernel.Open()
	if err != nil {
		c.Detail = "guest kernel: " + err.Error()
		return c
	}
	defer func() {
		if err := vmlinux.Close(); err != nil {
			slog.Warn("doctor: closing the guest kernel", "err", err)
		}
	}()
	initrd, err := guestInitramfs(init)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	vm, err := microvm.Start(ctx, microvm.Config{KernelFile: vmlinux, KernelArgs: args, Initrd: initrd})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	b := vm.Boot()
	if err := vm.Close(); err != nil {
		c.Detail = fmt.Sprintf("booted, but QEMU ended badly: %v", err)
		return c
	}
	c.Status, c.Fix = OK, ""
	c.Detail = fmt.Sprintf("booted under %s to the guest's hello in %.0f ms (kernel to /init %.0f ms by the guest's clock, /init to hello %.0f ms)",
		vm.Accel().Accel, ms(b.ToHello), ms(b.KernelToInit), ms(b.InitToHello))
	return c
}

// guestInitramfs wraps init, opened under nsinit's trust rule (it runs as
// the guest's PID 1), in the guest initramfs.
func guestInitramfs(init string) (b []byte, err error) {
	f, err := nsinit.OpenTrustedData(init)
	if err != nil {
		return nil, fmt.Errorf("guest init: %w (make build puts warden-init beside warden)", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			slog.Warn("doctor: closing the guest init", "err", cerr)
		}
	}()
	if err := staticELF(f); err != nil {
		return nil, err
	}
	return microvm.Initramfs(f)
}

// staticELF refuses an init that needs a dynamic loader, which the
// initramfs does not hold (make build links warden-init with CGO_ENABLED=0).
func staticELF(f *os.File) error {
	e, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("guest init %s is not an ELF binary: %w", f.Name(), err)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("guest init %s is dynamically linked; build it with CGO_ENABLED=0 (make build)", f.Name())
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
