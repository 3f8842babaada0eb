package microvm

import (
	"fmt"
	"os"

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
// time cfg's quota, else as many CPUs as the guest has vCPUs.
func limits(cfg Config, accel Accel) cgroup.Limits {
	mib := cfg.MemoryMiB + headroomMiB
	if accel == TCG {
		mib += tbSizeMiB
	}
	cpus := float64(cfg.CPUs)
	if cfg.CPUQuota > 0 {
		cpus = cfg.CPUQuota
	}
	return cgroup.Limits{MemoryBytes: int64(mib) << 20, Pids: qemuPids, CPUs: cpus}
}

// makeCgroup creates QEMU's cgroup and opens its tasks files (v1) and
// those of warden's own, which the thread that forks QEMU writes to join
// it just before the fork and to leave it just after (joinCgroup), so QEMU
// is born inside: no moment outside its limits. The kernel checks the
// opener's credentials, root's here. On v2 QEMU starts stopped (-S) and
// runs its guest only once moved in (settle), over a QMP socket.
func (l *launch) makeCgroup() error {
	cg, err := cgroup.New(boxname.New(), limits(l.cfg, l.accel.Accel))
	if err != nil {
		return fmt.Errorf("microvm: QEMU's cgroup: %w", err)
	}
	l.cg = cg
	p := cg.Placement()
	if startStopped(p) {
		if err := l.openQMP(); err != nil {
			return err
		}
	}
	if len(p.ThreadFiles) == 0 {
		return nil
	}
	if l.tasks, err = openTasks(p.ThreadFiles); err == nil {
		l.ownTasks, err = openTasks(p.ReturnFiles)
	}
	return err
}

// startStopped says whether QEMU starts stopped and is continued over QMP
// once in its cgroup: on v2 (no ThreadFiles), where a thread cannot join
// a cgroup alone and QEMU's filter refuses clone3's CLONE_INTO_CGROUP. A
// variable so that tests take that path on a v1 host too.
var startStopped = func(p cgroup.Placement) bool { return len(p.ThreadFiles) == 0 }

// openTasks opens cgroup tasks files for writing.
func openTasks(paths []string) ([]*os.File, error) {
	var fs []*os.File
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			for _, f := range fs {
				closeLogged(f, f.Name())
			}
			return nil, fmt.Errorf("microvm: opening the cgroup file %s: %w", p, err)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// joinCgroup moves the calling thread, QEMU's, into the cgroups of tasks
// in every hierarchy (v1 moves one thread: the rest of warden stays out).
func joinCgroup(tasks []*os.File) error {
	for _, f := range tasks {
		if _, err := f.Write([]byte("0")); err != nil {
			return fmt.Errorf("microvm: moving QEMU's thread into the cgroup of %s: %w", f.Name(), err)
		}
	}
	return nil
}

// deleteCgroup removes a cgroup whose QEMU has been reaped, logging a
// failure.
func deleteCgroup(cg cgroup.Cgroup) {
	if err := cg.Delete(); err != nil {
		warn("removing QEMU's cgroup "+cg.Path(), err)
	}
}
