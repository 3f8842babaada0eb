//go:build linux

package plan

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// currentCPU is the CPU this thread runs on (getcpu(2)), or -1.
func currentCPU() int {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1
	}
	return int(cpu)
}

// maxMaskWords bounds the CPU mask affinity tries: 1<<20 CPUs, far above
// any kernel's NR_CPUS.
const maxMaskWords = 1 << 14

// affinity is this thread's CPU mask. The kernel refuses (EINVAL) a
// buffer smaller than the host's possible CPUs, so it starts at
// unix.CPUSet's 1024 bits and doubles until the mask fits.
func affinity() ([]uint64, error) {
	for words := len(unix.CPUSet{}); words <= maxMaskWords; words *= 2 {
		mask := make([]uint64, words)
		_, _, e := unix.RawSyscall(unix.SYS_SCHED_GETAFFINITY, 0, uintptr(words*8), uintptr(unsafe.Pointer(&mask[0])))
		switch e {
		case 0:
			return mask, nil
		case unix.EINVAL:
			continue
		default:
			return nil, e
		}
	}
	return nil, unix.EINVAL
}

// setAffinity sets this thread's CPU mask (as long as affinity's).
func setAffinity(mask []uint64) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0]))); e != 0 {
		return e
	}
	return nil
}
