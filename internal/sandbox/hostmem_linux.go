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
