package microvm

import (
	"os"

	"golang.org/x/sys/unix"
)

// kvmGetAPIVersion is KVM_GET_API_VERSION, _IO(0xAE, 0x00).
const kvmGetAPIVersion = 0xAE00

var realProbe = hostProbe{kvmVersion: kvmVersion, cpuinfo: readCPUInfo, kvmNode: kvmNode}

func kvmNode() (gid, mode uint32, err error) {
	var st unix.Stat_t
	if err := unix.Stat("/dev/kvm", &st); err != nil {
		return 0, 0, &os.PathError{Op: "stat", Path: "/dev/kvm", Err: err}
	}
	return st.Gid, st.Mode, nil
}

func kvmVersion() (int, error) {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: "/dev/kvm", Err: err}
	}
	defer unix.Close(fd)
	return unix.IoctlRetInt(fd, kvmGetAPIVersion)
}

func readCPUInfo() ([]byte, error) { return os.ReadFile("/proc/cpuinfo") }
