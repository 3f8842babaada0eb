package vmkernel

import "strconv"

// HZ is the kernel's tick rate (CONFIG_HZ_100 in config.fragment): the
// loops-per-jiffy BootArgs passes depend on it.
const HZ = 100

// MaxCPUs is the most vCPUs the kernel brings up (CONFIG_NR_CPUS in
// config.fragment): the launcher refuses a VM of more.
const MaxCPUs = 8

// BootArgs are the kernel command-line arguments this kernel needs on
// QEMU's microvm machine, beside the launcher's own (console, init); the
// launcher owns the command line and adds these:
//
//   - reboot=t: a reboot (which ends the VM, QEMU running with
//     -no-reboot; a panic reboots at once, PANIC_TIMEOUT=-1) is a triple
//     fault at once. The default first polls the keyboard controller
//     microvm does not have, which took about 10 s under TCG.
//   - with tscKHz > 0, the host's TSC frequency in kHz (under TCG the
//     guest's TSC is the host's): tsc_early_khz= skips the early TSC
//     calibration, which hung about one boot in four under TCG; lpj=
//     skips each secondary vCPU's delay-loop calibration (0.4 s under
//     TCG); tsc=reliable keeps the TSC as the clock, which TCG's CPU
//     model (no invariant-TSC flag) would otherwise have marked unstable
//     with more than one vCPU, leaving the kernel on jiffies (every
//     two-vCPU boot hung so). Even with these, two vCPUs under TCG hung
//     about one boot in five: boot one vCPU there.
//   - with tcg (QEMU's software emulation, no KVM), mitigations=off: the
//     emulated CPU does not speculate, so the CPU mitigations the kernel
//     is built with (config.fragment) would only cost time. Under KVM
//     the guest runs on the host's CPU and keeps them.
//   - with tcg, no_timer_check and noapictimer, two timer checks that
//     take a large share of the kernel's boot under TCG (measured in
//     docs/performance.md) and decide nothing on QEMU's microvm machine.
//     no_timer_check skips the check that the PIT's interrupt arrives
//     through the IO-APIC (a busy wait for ten ticks; microvm wires it
//     one fixed way, and under KVM, with pic=off, the check never runs).
//     noapictimer keeps the PIT, which microvm has under TCG only
//     (pit=on), as the tick and the one-shot timer instead of the local
//     APIC timer, whose frequency the kernel would otherwise measure
//     against the PIT for ten ticks and verify for ten more (TCG's CPU
//     has no TSC-deadline mode and no crystal frequency in CPUID to skip
//     that). With one vCPU, all TCG boots (more hang), the PIT serves
//     every timer; neither changes what the guest's code can reach.
//
// The TCG-only arguments are TCGOnlyArgs.
func BootArgs(tscKHz int, tcg bool) []string {
	args := []string{"reboot=t"}
	if tcg {
		args = append(args, TCGOnlyArgs()...)
	}
	if tscKHz > 0 {
		args = append(args,
			"tsc_early_khz="+strconv.Itoa(tscKHz),
			"lpj="+strconv.Itoa(tscKHz*1000/HZ),
			"tsc=reliable")
	}
	return args
}

// TCGOnlyArgs are the arguments BootArgs adds under TCG alone (see there
// why), the one list of them. Each is wrong under KVM, where the guest
// runs on the host's CPU and microvm has no PIT: mitigations=off would
// drop the guest kernel's CPU mitigations, and noapictimer would leave
// the guest no timer, so its boot hangs. The launcher refuses them under
// KVM (microvm's checkAccel), so a caller that pairs TCG's arguments with
// KVM fails at once. It returns a new slice each call, so no caller can
// change the list.
func TCGOnlyArgs() []string {
	return []string{"mitigations=off", "no_timer_check", "noapictimer"}
}
