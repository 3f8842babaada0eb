package vmkernel

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxCPUInfo bounds what HostTSCKHz reads of /proc/cpuinfo: the first
// CPU's block is at its start.
const maxCPUInfo = 64 << 10

// HostTSCKHz is the host's TSC frequency in kHz, for BootArgs: /proc/
// cpuinfo's "cpu MHz" of the first CPU, trusted only where its flags say
// the host is itself a VM (hypervisor) whose TSC runs at a constant rate
// (constant_tsc) that the kernel was told rather than measured
// (tsc_known_freq), and that it cannot read the CPU's actual clock
// (no aperfmperf): only there is "cpu MHz" the TSC's rate. On bare metal
// (aperfmperf) it is the core's current clock, which frequency scaling
// moves. Elsewhere it is an error: without the timing arguments about
// one TCG boot in four hung, so the launcher should not boot under TCG.
func HostTSCKHz() (int, error) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0, fmt.Errorf("reading the host's TSC frequency: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCPUInfo))
	if err != nil {
		return 0, fmt.Errorf("reading the host's TSC frequency: %w", err)
	}
	return parseTSCKHz(b)
}

// parseTSCKHz reads the first CPU's block of a /proc/cpuinfo.
func parseTSCKHz(cpuinfo []byte) (int, error) {
	block, _, _ := bytes.Cut(cpuinfo, []byte("\n\n"))
	var mhz string
	var flags []string
	for _, line := range strings.Split(string(block), "\n") {
		key, val, ok := strings.Cut(line, ":")
		switch key = strings.TrimSpace(key); {
		case !ok:
		case key == "cpu MHz":
			mhz = strings.TrimSpace(val)
		case key == "flags":
			flags = strings.Fields(val)
		}
	}
	if !hasAll(flags, "hypervisor", "constant_tsc", "tsc_known_freq") {
		return 0, fmt.Errorf("the host's TSC frequency is unknown: its CPU flags lack hypervisor, constant_tsc or tsc_known_freq")
	}
	if hasAll(flags, "aperfmperf") {
		return 0, fmt.Errorf("the host's TSC frequency is unknown: its CPU has aperfmperf, so cpu MHz is the current clock, not the TSC's")
	}
	f, err := strconv.ParseFloat(mhz, 64)
	if err != nil || f < 100 || f > 100000 {
		return 0, fmt.Errorf("the host's TSC frequency is unknown: /proc/cpuinfo has cpu MHz %q", mhz)
	}
	return int(f*1000 + 0.5), nil
}

func hasAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
