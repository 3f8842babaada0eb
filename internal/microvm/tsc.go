package microvm

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// tscKHzFromCPUInfo reads the first processor's "cpu MHz" as kHz: under
// TCG the guest's TSC ticks at the host's rate, and on hosts with an
// invariant TSC (constant_tsc) that line is the TSC frequency the host
// kernel detected.
func tscKHzFromCPUInfo(info []byte) (int, error) {
	for line := range bytes.Lines(info) {
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(key)) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(string(bytes.TrimSpace(val)), 64)
		if err != nil || mhz < 100 || mhz > 20000 || math.IsNaN(mhz) {
			return 0, fmt.Errorf("implausible cpu MHz %q in /proc/cpuinfo: set the TSC frequency explicitly", bytes.TrimSpace(val))
		}
		return int(math.Round(mhz * 1000)), nil
	}
	return 0, fmt.Errorf("no cpu MHz line in /proc/cpuinfo: set the TSC frequency explicitly")
}
