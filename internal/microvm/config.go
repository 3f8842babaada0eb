package microvm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/vmguest"
	"github.com/warden-sandbox/warden/internal/vmkernel"
)

// Config says what VM to start.
type Config struct {
	// QEMU is the qemu-system-x86_64 binary; "" looks it up on PATH.
	QEMU string
	// Kernel is the guest's uncompressed vmlinux (PVH direct boot). The
	// host opens and checks it, and QEMU's root binds the file that
	// descriptor is (open_tree on it) at guestKernel, where QEMU, under
	// its own unprivileged uid, opens it: so it must be world-readable.
	Kernel string
	// KernelFile is the guest kernel already opened and checked by the
	// caller (GuestKernel's Kernel.Open), given instead of Kernel: QEMU's
	// root binds the file this descriptor is, so what boots is the file
	// checked. It must be a world-readable file on a mounted filesystem
	// (open_tree copies its mount), not a memfd or other file of no
	// mount. The caller keeps and closes it.
	KernelFile *os.File
	// Initrd is the initramfs archive (see Initramfs), written into
	// QEMU's root for this VM alone; InitrdPath names one on disk
	// instead, and InitrdFile is one the caller opened and checked (as
	// KernelFile is: world-readable, on a mounted filesystem; the caller
	// keeps and closes it), so VMs can share one file rather than each
	// holding a copy. Exactly one is set.
	Initrd     []byte
	InitrdPath string
	InitrdFile *os.File
	// MemoryMiB is the guest's RAM; 0 means DefaultMemoryMiB.
	MemoryMiB int
	// CPUs is the number of vCPUs; 0 means 1.
	CPUs int
	// CPUQuota caps the CPU time QEMU's cgroup may use, in CPUs' worth
	// (0.5 = half a CPU); 0 means CPUs. It lets a box get less than
	// whole vCPUs (--cpus 0.5 still needs one vCPU) and may not exceed
	// CPUs.
	CPUQuota float64
	// Accel is the accelerator; "" means HostAccel's choice.
	Accel Accel
	// KernelArgs are the parameters the guest kernel itself needs on
	// this machine, one token each, as GuestKernel gives them with the
	// kernel (vmkernel.BootArgs, the one place that knows them). They may not repeat a
	// key of the launcher's own (console, quiet, warden.vm, rdinit).
	KernelArgs []string
	// Cmdline holds extra kernel parameters, one token each. They may not
	// repeat a key the launcher or KernelArgs sets.
	Cmdline []string
	// BootTimeout bounds the wait for the guest's hello, not counting the
	// time QEMU waited for a CPU on a loaded host (at most maxBootStretch
	// times it in all); 0 means DefaultBootTimeout, at most maxBootTimeout.
	BootTimeout time.Duration
	// Shares are the host directories the guest mounts over 9p.
	Shares []Share
	// ID is the host uid and gid QEMU runs as, leased by the caller where
	// files QEMU writes to a share must belong to an id the caller knows
	// (a box's scratch, which the host's file API reaches as that id);
	// the caller releases it once the VM has ended and those files are
	// gone. Nil leases one for this VM alone.
	ID *hostid.Lease
}

// Share is a host directory the guest mounts over 9p.
type Share struct {
	// Tag is the 9p mount tag the guest names it by.
	Tag string
	// Dir is the host directory shared.
	Dir string
	// ReadOnly makes QEMU refuse the guest's writes.
	ReadOnly bool
}

// maxShares is how many shares fit the microvm machine's virtio-mmio
// transports (8 in QEMU 7.2) beside the serial port and the RNG.
const maxShares = 6

// Defaults and bounds for Config.
const (
	DefaultMemoryMiB   = 256
	DefaultBootTimeout = 10 * time.Second
	// maxBootTimeout keeps maxBootStretch times it far from overflowing
	// and a hung guest's hold on its resources bounded.
	maxBootTimeout  = time.Hour
	minMemoryMiB    = 64
	maxMemoryMiB    = 1 << 20
	maxCPUs         = vmkernel.MaxCPUs // the guest kernel brings up no more
	maxCmdlineToken = 256
)

// tbSizeMiB is TCG's translation cache (-accel tcg,tb-size=): QEMU 7.2's
// default maps 1 GiB (read, write and execute) on top of the guest's RAM.
// At 64 MiB the cache refilled during boot: TestBoot took 2.4-3.9 s instead
// of 1-2 s and one guest power-off in four outlasted closeGrace; at 128 MiB
// boots were as fast as with the default.
const tbSizeMiB = 128

// agentFD is the agent socket's descriptor number in QEMU: stdin is
// /dev/null, stdout and stderr the console log pipe, then the agent socket.
// QEMU reads the kernel and initrd by path in its own root (guestKernel,
// guestInitrd; confine_linux.go), binds of the files the host opened.
const agentFD = 3

// guestKernel and guestInitrd are where QEMU's root holds the guest's
// kernel and initrd, read-only.
const (
	guestKernel = "/vm/vmlinux"
	guestInitrd = "/vm/initrd"
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
	case (c.Kernel == "") == (c.KernelFile == nil):
		return c, errors.New("microvm: give exactly one of Kernel and KernelFile (build a kernel with `make microvm-kernel`)")
	case countSet(c.Initrd != nil, c.InitrdPath != "", c.InitrdFile != nil) != 1:
		return c, errors.New("microvm: give exactly one of Initrd, InitrdPath and InitrdFile")
	case c.MemoryMiB < minMemoryMiB || c.MemoryMiB > maxMemoryMiB:
		return c, fmt.Errorf("microvm: memory %d MiB is outside %d-%d MiB", c.MemoryMiB, minMemoryMiB, maxMemoryMiB)
	case c.CPUs < 1 || c.CPUs > maxCPUs:
		return c, fmt.Errorf("microvm: %d vCPUs is outside 1-%d", c.CPUs, maxCPUs)
	case c.CPUQuota < 0 || c.CPUQuota > float64(c.CPUs):
		return c, fmt.Errorf("microvm: CPU quota %g is outside 0-%d (the vCPUs); give at most one CPU's worth per vCPU", c.CPUQuota, c.CPUs)
	case c.BootTimeout < 0 || c.BootTimeout > maxBootTimeout:
		return c, fmt.Errorf("microvm: boot timeout %v is outside 0-%v", c.BootTimeout, maxBootTimeout)
	case c.Accel != "" && c.Accel != KVM && c.Accel != TCG:
		return c, fmt.Errorf("microvm: accelerator %q is neither %q nor %q", c.Accel, KVM, TCG)
	}
	if err := checkShares(c.Shares); err != nil {
		return c, err
	}
	for _, tok := range c.KernelArgs {
		if err := checkToken(tok, fixedCmdline); err != nil {
			return c, err
		}
	}
	set := append(append([]string{}, fixedCmdline...), c.KernelArgs...)
	for _, tok := range c.Cmdline {
		if err := checkToken(tok, set); err != nil {
			return c, err
		}
	}
	return c, nil
}

// countSet is how many of set are true.
func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// checkAccel refuses what cfg cannot run under accel: more than one vCPU
// under TCG, where about one boot in five hung (the guest kernel's
// measurement, with every TSC workaround it knows), and under KVM a
// kernel argument meant for TCG alone (vmkernel.TCGOnlyArgs), which would
// drop the guest's CPU mitigations on the host's CPU or leave it no
// timer. The kernel's arguments and the accelerator are chosen apart
// (GuestKernel, Config.Accel), so this is where a mismatch is caught.
func (c Config) checkAccel(accel Accel) error {
	if accel == TCG && c.CPUs > 1 {
		return fmt.Errorf("microvm: %d vCPUs under TCG (software emulation): multi-vCPU TCG boots hang; use 1 vCPU or a host with KVM", c.CPUs)
	}
	if accel == TCG {
		return nil
	}
	for _, tok := range append(append([]string{}, c.KernelArgs...), c.Cmdline...) {
		for _, only := range vmkernel.TCGOnlyArgs() {
			if sameParam(tok, only) {
				return fmt.Errorf("microvm: kernel parameter %q is for TCG only and unsafe under %s; take the kernel's arguments from GuestKernel with the VM's accelerator", tok, accel)
			}
		}
	}
	return nil
}

// sameParam reports whether kernel parameters a and b are the same
// setting: the kernel treats '-' and '_' in a parameter's name alike.
func sameParam(a, b string) bool {
	ka, va, _ := strings.Cut(a, "=")
	kb, vb, _ := strings.Cut(b, "=")
	norm := func(k string) string { return strings.ReplaceAll(k, "-", "_") }
	return norm(ka) == norm(kb) && va == vb
}

// shareArgs are QEMU's arguments for the shares: each a 9p file system
// device on the local backend. security_model=none: QEMU, under its own
// unprivileged uid, does every operation as that uid and passes the
// host's owners and modes through unchanged (passthrough would have to
// chown files to the guest's ids, which needs root; mapped-xattr would
// keep the guest's owners in xattrs the host's file API does not read).
// A box's user runs as QEMU's uid in the guest (the caller's Config.ID),
// so what it writes is its own on both sides. Read-only shares are
// refused writes by QEMU itself (readonly=on) and remap the inode numbers
// of any mount below them (multidevs=remap), so two files on different
// host file systems never look alike to the guest.
func shareArgs(shares []Share) []string {
	var a []string
	for i, sh := range shares {
		id := "fs" + strconv.Itoa(i)
		fsdev := "local,id=" + id + ",path=" + sh.Dir + ",security_model=none"
		if sh.ReadOnly {
			fsdev += ",readonly=on,multidevs=remap"
		}
		a = append(a, "-fsdev", fsdev, "-device", "virtio-9p-device,fsdev="+id+",mount_tag="+sh.Tag)
	}
	return a
}

// checkToken refuses a kernel parameter that could smuggle in more
// parameters or override one of set, the parameters already on the
// command line.
func checkToken(tok string, set []string) error {
	if tok == "" || len(tok) > maxCmdlineToken {
		return fmt.Errorf("microvm: kernel parameter %q must be 1-%d bytes", tok, maxCmdlineToken)
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' || r == '"' {
			return fmt.Errorf("microvm: kernel parameter %q holds a space, quote or non-printable character; pass one token per entry", tok)
		}
	}
	key, _, _ := strings.Cut(tok, "=")
	for _, own := range set {
		if k, _, _ := strings.Cut(own, "="); k == key {
			return fmt.Errorf("microvm: kernel parameter %q overrides %q, which is already set", tok, own)
		}
	}
	return nil
}

// fixedCmdline is the launcher's own part of the guest kernel command
// line: the console on the virtio console (hvc0, the VM has no UART),
// quiet so the TCG console costs little, the initramfs's /init as init
// (the kernel's default, made explicit so no parameter changes it), and
// the key the guest init requires. What the kernel needs to boot on this
// machine comes from Config.KernelArgs.
var fixedCmdline = []string{"console=hvc0", "quiet", "rdinit=/init", vmguest.CmdlineKey}

// machineOpts is microvm's machine line under accel. Under TCG it has
// pit=on,pic=on, because the PIT is the guest kernel's timer there (its
// BootArgs skip the local APIC timer, which would only be calibrated
// against the PIT): without one (TCG's APIC has no TSC-deadline mode and
// CPUID 0x15 no crystal) it logged "APIC timer disabled due to
// verification failure" and an idle guest got no timer events at all, so
// sleep 1 never returned; pit=on alone fails too, as the PIT's interrupt
// needs the PIC.
// Under KVM the guest has kvmclock and the TSC deadline timer, so the
// machine keeps pit=off,pic=off: no in-kernel PIT or PIC emulation for a
// guest to attack.
func machineOpts(accel Accel) string {
	legacy := "pit=off,pic=off"
	if accel == TCG {
		legacy = "pit=on,pic=on"
	}
	return "microvm,x-option-roms=off," + legacy + ",isa-serial=off,rtc=on,acpi=off"
}

// tcgCPU is the guest's CPU model under TCG: QEMU's max without ERMS
// (fast rep movsb/stosb). With ERMS the guest kernel clears pages and
// copies to and from user space with rep stosb and rep movsb, which TCG
// (QEMU 7.2) runs one byte per translated-block iteration; without it
// the kernel uses rep stosq and rep movsq, eight bytes an iteration
// (docs/performance.md has the measurements). ERMS is a speed hint
// only: no isolation depends on it.
const tcgCPU = "max,erms=off"

// args builds QEMU's command line for cfg (normalized) under accel.
func args(cfg Config, accel Accel) []string {
	cmdline := append(append(append([]string{}, fixedCmdline...), cfg.KernelArgs...), cfg.Cmdline...)
	cpu, accelOpt := "host", string(accel)
	if accel == TCG {
		accelOpt += ",tb-size=" + strconv.Itoa(tbSizeMiB)
		cpu = tcgCPU
	}
	return append([]string{
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-machine", machineOpts(accel),
		"-accel", accelOpt, "-cpu", cpu,
		"-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", guestKernel, "-initrd", guestInitrd,
		"-append", strings.Join(cmdline, " "),
		"-device", "virtio-serial-device",
		"-chardev", "stdio,id=console,signal=off",
		"-device", "virtconsole,chardev=console",
		"-chardev", "socket,id=agent,fd=" + strconv.Itoa(agentFD),
		"-device", "virtserialport,chardev=agent,name=" + vmguest.PortName,
		"-device", "virtio-rng-device",
	}, shareArgs(cfg.Shares)...)
}
