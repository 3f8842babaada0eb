package microvm

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/cgroup"
)

// What one QEMU may use beyond its guest's RAM, enforced by its cgroup.
const (
	// headroomMiB is QEMU's own memory besides guest RAM and TCG's
	// translation cache: its binary, libraries and heap, the initrd it
	// keeps mapped (an idle VM's QEMU measured about 40 MiB of these).
	headroomMiB = 64
	// qemuPids bounds QEMU's threads: its main loop, RCU, one per vCPU
	// and a few workers (an idle VM runs fewer than 10).
	qemuPids = 32
)

// limits are the kernel's caps on cfg's QEMU: memory for the guest, the
// translation cache under TCG and QEMU itself; a few dozen threads; CPU
// time as many CPUs as the guest has vCPUs.
func limits(cfg Config, accel Accel) cgroup.Limits {
	mib := cfg.MemoryMiB + headroomMiB
	if accel == TCG {
		mib += tbSizeMiB
	}
	return cgroup.Limits{MemoryBytes: int64(mib) << 20, Pids: qemuPids, CPUs: float64(cfg.CPUs)}
}

// makeCgroup creates QEMU's cgroup; QEMU is moved in just after it starts
// (see settle).
func (l *launch) makeCgroup() error {
	cg, err := cgroup.New(boxname.New(), limits(l.cfg, l.accel.Accel))
	if err != nil {
		return fmt.Errorf("microvm: QEMU's cgroup: %w", err)
	}
	l.cg = cg
	return nil
}

// deleteCgroup removes a cgroup whose QEMU has been reaped, logging a
// failure.
func deleteCgroup(cg cgroup.Cgroup) {
	if err := cg.Delete(); err != nil {
		warn("removing QEMU's cgroup "+cg.Path(), err)
	}
}
