package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOwnLimitsWalkUp: the smallest memory limit and CPU quota on the way
// from a cgroup up to the hierarchy's top count, whichever level sets
// them; "no limit" values count for nothing.
func TestOwnLimitsWalkUp(t *testing.T) {
	top := t.TempDir()
	mid := filepath.Join(top, "system.slice")
	own := filepath.Join(mid, "warden.service")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, file, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(top, "memory.limit_in_bytes", "9223372036854771712")
	write(mid, "memory.limit_in_bytes", "2147483648")
	write(own, "memory.limit_in_bytes", "4294967296")
	write(top, "cpu.cfs_quota_us", "-1")
	write(top, "cpu.cfs_period_us", "100000")
	write(own, "cpu.cfs_quota_us", "150000")
	write(own, "cpu.cfs_period_us", "100000")
	write(mid, "memory.max", "max")
	write(own, "memory.max", "1073741824")
	write(mid, "cpu.max", "50000 100000")
	write(own, "cpu.max", "max 100000")
	tests := []struct {
		name string
		read func(string) float64
		want float64
	}{
		{"v1 memory", memoryV1, 2 << 30},
		{"v1 cpu", cpuV1, 1.5},
		{"v2 memory", memoryV2, 1 << 30},
		{"v2 cpu", cpuV2, 0.5},
	}
	for _, tt := range tests {
		if got := minUp(own, top, tt.read); got != tt.want {
			t.Errorf("%s: minUp() = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := minUp(top, top, cpuV2); got != 0 {
		t.Errorf("minUp() with no quota anywhere = %v, want 0", got)
	}
}

// TestOwnLimitsLive: on this host the call works and gives sane numbers.
func TestOwnLimitsLive(t *testing.T) {
	mem, cpus, err := OwnLimits()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	if mem < 0 || cpus < 0 {
		t.Errorf("OwnLimits() = %d, %v, want none negative", mem, cpus)
	}
}
