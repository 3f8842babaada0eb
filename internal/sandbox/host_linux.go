package sandbox

import "golang.org/x/sys/unix"

// hostMemory is the host's RAM in bytes.
func hostMemory() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, err
	}
	return int64(si.Totalram) * int64(si.Unit), nil
}

// hardLimits are this process's hard RLIMIT_NOFILE and RLIMIT_NPROC,
// which no sandbox it starts can raise (-1 for none).
func hardLimits() (openFiles, procs int64) {
	get := func(res int) int64 {
		var lim unix.Rlimit
		if unix.Getrlimit(res, &lim) != nil || lim.Max == unix.RLIM_INFINITY || lim.Max > 1<<62 {
			return -1
		}
		return int64(lim.Max)
	}
	return get(unix.RLIMIT_NOFILE), get(unix.RLIMIT_NPROC)
}
