package microvm

import (
	"os"

	"golang.org/x/sys/unix"
)

// kvmGetAPIVersion is KVM_GET_API_VERSION, _IO(0xAE, 0x00).
const kvmGetAPIVersion = 0xAE00

var realProbe = hostProbe{kvmVersion: kvmVersion, cpuinfo: readCPUInfo}

func kvmVersion() (int, error) {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: "/dev/kvm", Err: err}
	}
	defer unix.Close(fd)
	return unix.IoctlRetInt(fd, kvmGetAPIVersion)
}

func readCPUInfo() ([]byte, error) { return os.ReadFile("/proc/cpuinfo") }
