package sandbox

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

// AvailableMemory is the memory this process may use, in bytes: the
// host's RAM, or less when a cgroup warden runs in (a container, a
// systemd slice) has a lower limit.
func AvailableMemory() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, err
	}
	ram := int64(si.Totalram) * int64(si.Unit)
	if limit, _, err := cgroup.OwnLimits(); err == nil && limit > 0 {
		ram = min(ram, limit)
	}
	return ram, nil
}

// availableCPUs is the CPU cores this process may use: the host's, or
// fewer when a cgroup warden runs in has a CPU quota.
func availableCPUs() float64 {
	cpus := float64(runtime.NumCPU())
	if _, quota, err := cgroup.OwnLimits(); err == nil && quota > 0 {
		cpus = min(cpus, quota)
	}
	return cpus
}
