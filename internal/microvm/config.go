package microvm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/vmguest"
)

// Config says what VM to start.
type Config struct {
	// QEMU is the qemu-system-x86_64 binary; "" looks it up on PATH.
	QEMU string
	// Kernel is the guest's uncompressed vmlinux (PVH direct boot). It
	// must be world-readable: QEMU, running under its own unprivileged
	// uid, reopens the descriptor the host opened.
	Kernel string
	// Initrd is the initramfs archive (see Initramfs); InitrdPath names
	// one on disk instead. Exactly one is set.
	Initrd     []byte
	InitrdPath string
	// MemoryMiB is the guest's RAM; 0 means DefaultMemoryMiB.
	MemoryMiB int
	// CPUs is the number of vCPUs; 0 means 1.
	CPUs int
	// Accel is the accelerator; "" means HostAccel's choice.
	Accel Accel
	// Cmdline holds extra kernel parameters, one token each.
	Cmdline []string
	// BootTimeout bounds the wait for the guest's hello; 0 means DefaultBootTimeout.
	BootTimeout time.Duration
	// TSCkHz is the TSC frequency given to the guest under TCG
	// (tsc_early_khz); 0 reads the host's.
	TSCkHz int
}

// Defaults and bounds for Config.
const (
	DefaultMemoryMiB   = 256
	DefaultBootTimeout = 10 * time.Second
	minMemoryMiB       = 64
	maxMemoryMiB       = 1 << 20
	maxCPUs            = 64
	maxCmdlineToken    = 256
)

// tbSizeMiB is TCG's translation cache (-accel tcg,tb-size=): QEMU 7.2's
// default maps 1 GiB (read, write and execute) on top of the guest's RAM.
// Boot time was the same at 64 MiB.
const tbSizeMiB = 64

// agentFD etc. are the descriptor numbers QEMU gets: stdin is /dev/null,
// stdout and stderr the console log pipe, then the ExtraFiles in order.
const (
	kernelFD = 3
	initrdFD = 4
	agentFD  = 5
)

// normalize fills defaults and checks cfg, with one line saying what is
// wrong and how to fix it.
func (c Config) normalize() (Config, error) {
	if c.MemoryMiB == 0 {
		c.MemoryMiB = DefaultMemoryMiB
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = DefaultBootTimeout
	}
	switch {
	case c.Kernel == "":
		return c, errors.New("microvm: no guest kernel given: build one with `make microvm-kernel`")
	case (c.Initrd == nil) == (c.InitrdPath == ""):
		return c, errors.New("microvm: give exactly one of Initrd and InitrdPath")
	case c.MemoryMiB < minMemoryMiB || c.MemoryMiB > maxMemoryMiB:
		return c, fmt.Errorf("microvm: memory %d MiB is outside %d-%d MiB", c.MemoryMiB, minMemoryMiB, maxMemoryMiB)
	case c.CPUs < 1 || c.CPUs > maxCPUs:
		return c, fmt.Errorf("microvm: %d vCPUs is outside 1-%d", c.CPUs, maxCPUs)
	case c.BootTimeout < 0:
		return c, fmt.Errorf("microvm: boot timeout %v is negative", c.BootTimeout)
	case c.Accel != "" && c.Accel != KVM && c.Accel != TCG:
		return c, fmt.Errorf("microvm: accelerator %q is neither %q nor %q", c.Accel, KVM, TCG)
	case c.TSCkHz < 0:
		return c, fmt.Errorf("microvm: TSC frequency %d kHz is negative", c.TSCkHz)
	}
	for _, tok := range c.Cmdline {
		if err := checkToken(tok); err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkToken refuses a kernel parameter that could smuggle in more
// parameters or override the ones the launcher sets.
func checkToken(tok string) error {
	if tok == "" || len(tok) > maxCmdlineToken {
		return fmt.Errorf("microvm: kernel parameter %q must be 1-%d bytes", tok, maxCmdlineToken)
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' || r == '"' {
			return fmt.Errorf("microvm: kernel parameter %q holds a space, quote or non-printable character; pass one token per entry", tok)
		}
	}
	key, _, _ := strings.Cut(tok, "=")
	for _, own := range fixedCmdline {
		if k, _, _ := strings.Cut(own, "="); k == key {
			return fmt.Errorf("microvm: kernel parameter %q overrides %q, which the launcher sets", tok, own)
		}
	}
	if key == "tsc_early_khz" || key == "init" || key == "rdinit" {
		return fmt.Errorf("microvm: kernel parameter %q is set by the launcher", tok)
	}
	return nil
}

// fixedCmdline is the guest kernel command line the launcher always sets:
// the console on the virtio console (hvc0, the VM has no UART), quiet so
// the TCG console costs little, a panic ending the VM at once (QEMU runs
// with -no-reboot), a reset by triple fault (the guest's way to end the
// VM: without ACPI it cannot power off, and the default reset methods
// probe hardware the machine lacks), and the key the guest init requires.
var fixedCmdline = []string{"console=hvc0", "quiet", "panic=-1", "reboot=t", vmguest.CmdlineKey}

// args builds QEMU's command line for cfg (normalized) under accel.
// tscKHz is used only under TCG.
func args(cfg Config, accel Accel, tscKHz int) []string {
	cmdline := append([]string{}, fixedCmdline...)
	cpu, accelOpt := "host", string(accel)
	if accel == TCG {
		accelOpt += ",tb-size=" + strconv.Itoa(tbSizeMiB)
		// Without it one TCG boot in four hung calibrating the TSC
		// (the machine has no PIT to calibrate against).
		cmdline = append(cmdline, "tsc_early_khz="+strconv.Itoa(tscKHz))
		cpu = "max"
	}
	cmdline = append(cmdline, cfg.Cmdline...)
	return []string{
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-machine", "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=off,rtc=on,acpi=off",
		"-accel", accelOpt, "-cpu", cpu,
		"-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", fdPath(kernelFD), "-initrd", fdPath(initrdFD),
		"-append", strings.Join(cmdline, " "),
		"-device", "virtio-serial-device",
		"-chardev", "stdio,id=console,signal=off",
		"-device", "virtconsole,chardev=console",
		"-chardev", "socket,id=agent,fd=" + strconv.Itoa(agentFD),
		"-device", "virtserialport,chardev=agent,name=" + vmguest.PortName,
		"-device", "virtio-rng-device",
	}
}

func fdPath(fd int) string { return "/dev/fd/" + strconv.Itoa(fd) }
