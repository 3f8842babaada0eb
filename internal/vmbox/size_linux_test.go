package vmbox

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestVMSize: --memory becomes the VM's RAM plus the guest's own need;
// --cpus becomes whole vCPUs (one under TCG) and QEMU's CPU quota keeps
// a fraction, never above the vCPUs.
func TestVMSize(t *testing.T) {
	for _, tc := range []struct {
		l          spec.Limits
		accel      microvm.Accel
		mib, vcpus int
		quota      float64
	}{
		{spec.Limits{}, microvm.TCG, microvm.DefaultMemoryMiB + guestMiB, 1, 0},
		{spec.Limits{MemoryBytes: 256 << 20, CPUs: 0.5}, microvm.TCG, 256 + guestMiB, 1, 0.5},
		{spec.Limits{MemoryBytes: 100<<20 + 1, CPUs: 2}, microvm.TCG, 101 + guestMiB, 1, 1},
		{spec.Limits{CPUs: 1.5}, microvm.KVM, microvm.DefaultMemoryMiB + guestMiB, 2, 1.5},
	} {
		if got := memoryMiB(tc.l); got != tc.mib {
			t.Errorf("memoryMiB(%+v) = %d, want %d", tc.l, got, tc.mib)
		}
		if got := vCPUs(tc.l, tc.accel); got != tc.vcpus {
			t.Errorf("vCPUs(%+v, %s) = %d, want %d", tc.l, tc.accel, got, tc.vcpus)
		}
		if got := cpuQuota(tc.l, tc.accel); got != tc.quota {
			t.Errorf("cpuQuota(%+v, %s) = %g, want %g", tc.l, tc.accel, got, tc.quota)
		}
	}
}
