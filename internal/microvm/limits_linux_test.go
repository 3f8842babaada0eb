package microvm

import "testing"

// TestLimitsCPU: QEMU's cgroup gets the CPU quota where one is given (a
// box's --cpus below its whole vCPUs), else its vCPUs.
func TestLimitsCPU(t *testing.T) {
	for _, tc := range []struct {
		cpus  int
		quota float64
		want  float64
	}{{1, 0, 1}, {2, 0, 2}, {1, 0.5, 0.5}, {2, 1.5, 1.5}} {
		if got := limits(Config{MemoryMiB: 64, CPUs: tc.cpus, CPUQuota: tc.quota}, TCG).CPUs; got != tc.want {
			t.Errorf("limits with %d vCPUs and quota %g: CPUs = %g, want %g", tc.cpus, tc.quota, got, tc.want)
		}
	}
}
