package spec

import (
	"math"
	"runtime"
	"time"
)

// Limits bound a sandbox's resources. A zero field means "no limit" except
// where Default says otherwise; DefaultLimits holds the values a run gets
// when the caller sets nothing.
type Limits struct {
	// Timeout is the wall-clock budget; the whole process tree is killed at it.
	Timeout time.Duration
	// MemoryBytes caps resident memory, tmpfs pages included; swap is off.
	MemoryBytes int64
	// Pids caps the number of tasks (processes and threads) of the user's code.
	Pids int64
	// CPUs caps CPU bandwidth in cores (1.5 = one and a half cores).
	CPUs float64
	// DiskBytes sizes the writable tmpfs shared by /workspace, /tmp and HOME.
	DiskBytes int64
	// OutputBytes caps how much of each of stdout and stderr is captured.
	OutputBytes int64
	// CPUTime caps CPU seconds per process (RLIMIT_CPU).
	CPUTime time.Duration
	// FileSizeBytes caps the size of any one file written (RLIMIT_FSIZE).
	FileSizeBytes int64
	// OpenFiles caps open descriptors per process (RLIMIT_NOFILE).
	OpenFiles int64
}

// DefaultLimits are modest enough that a forgotten flag never lets code eat
// the host, and generous enough for a data-analysis script.
var DefaultLimits = Limits{
	Timeout:       60 * time.Second,
	MemoryBytes:   512 * MiB,
	Pids:          256,
	CPUs:          1,
	DiskBytes:     256 * MiB,
	OutputBytes:   1 * MiB,
	CPUTime:       120 * time.Second,
	FileSizeBytes: 256 * MiB,
	OpenFiles:     1024,
}

// Bounds keep limits inside what a single host can honour; they reject typos
// such as --memory 512TiB before anything is built.
const (
	MaxTimeout     = 24 * time.Hour
	MinMemoryBytes = 4 * MiB
	MaxPids        = 1 << 20
	MaxOpenFiles   = 1 << 20
	MinDiskBytes   = 1 * MiB
	MaxCPUs        = 1024
	// MinCPUs is the smallest CPU share the kernel's CFS quota can express
	// (1 ms per 100 ms period).
	MinCPUs = 0.01
)

// QuotaCPUs is how many cores' worth of CPU a sandbox with cpus may use:
// cpus, or the host's cores when it has no quota (0) or asks for more
// than the host has, since a quota above the host's cores is never
// given. What the host spends on a sandbox's behalf (exec starts, egress
// connections) is paced in proportion to it, so a tenant allowed to ask
// for 1024 CPUs on a 2-core host is paced as one with 2.
func QuotaCPUs(cpus float64) float64 {
	host := float64(runtime.NumCPU())
	if cpus <= 0 || cpus > host {
		return host
	}
	return cpus
}

// Validate reports the first limit out of its bounds.
func (l *Limits) Validate() error {
	switch {
	case l.Timeout < 0 || l.Timeout > MaxTimeout:
		return invalid("timeout %s is out of range: use 0 (none) up to %s", l.Timeout, MaxTimeout)
	case l.MemoryBytes != 0 && l.MemoryBytes < MinMemoryBytes:
		return invalid("memory %s is too small to start a process: use at least %s, or 0 for no limit",
			FormatSize(l.MemoryBytes), FormatSize(MinMemoryBytes))
	case l.Pids < 0 || l.Pids > MaxPids:
		return invalid("pids %d is out of range: use 0 (none) up to %d", l.Pids, MaxPids)
	case math.IsNaN(l.CPUs) || l.CPUs < 0 || l.CPUs > MaxCPUs || (l.CPUs > 0 && l.CPUs < MinCPUs):
		return invalid("cpus %g is out of range: use 0 (none) or %g up to %d", l.CPUs, MinCPUs, MaxCPUs)
	case l.DiskBytes < MinDiskBytes:
		return invalid("disk %s is too small: use at least %s", FormatSize(l.DiskBytes), FormatSize(MinDiskBytes))
	case l.OutputBytes < 0:
		return invalid("output limit must not be negative")
	case l.CPUTime < 0:
		return invalid("cpu time must not be negative")
	case l.CPUTime%time.Second != 0:
		return invalid("cpu time %s must be whole seconds (the kernel counts seconds)", l.CPUTime)
	case l.FileSizeBytes < 0:
		return invalid("file size limit must not be negative")
	case l.OpenFiles < 0 || l.OpenFiles > MaxOpenFiles:
		return invalid("open files %d is out of range: use 0 (none) up to %d", l.OpenFiles, MaxOpenFiles)
	}
	return nil
}

// Inodes is the inode budget of the writable tmpfs: one per 4 KiB of disk,
// at least 1024, so a flood of empty files fails long before host memory.
func (l *Limits) Inodes() int64 {
	return max(l.DiskBytes/(4*KiB), 1024)
}
