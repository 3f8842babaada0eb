package testhost

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CgroupV2 returns where this host mounts its cgroup v2 hierarchy, for a
// test that needs cgroup v2 files; it skips (or fails in CI) when none is
// mounted.
func CgroupV2(t testing.TB) string {
	t.Helper()
	mnt, _ := cgroupMounts(t)
	if mnt == "" {
		SkipOrFail(t, "no cgroup v2 hierarchy is mounted")
	}
	return mnt
}

// CgroupV2Memory returns the cgroup v2 mount when it holds the memory
// controller, for a test of memory.max or memory.events. On a hybrid host,
// whose memory controller cgroup v1 holds, no v2 test can have it, so the
// test skips even in CI (which runs on such a host), naming covered: the
// e2e test that checks the same code on a guest's own cgroup v2. Any other
// lack skips, or fails in CI.
func CgroupV2Memory(t testing.TB, covered string) string {
	t.Helper()
	mnt, v1Memory := cgroupMounts(t)
	if mnt == "" {
		SkipOrFail(t, "no cgroup v2 hierarchy is mounted")
	}
	ctrl, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers"))
	if err != nil {
		SkipOrFail(t, "cannot read the cgroup v2 controllers: "+err.Error())
	}
	if slices.Contains(strings.Fields(string(ctrl)), "memory") {
		return mnt
	}
	if v1Memory {
		t.Skipf("the memory controller is cgroup v1's on this hybrid host, not %s's; %s covers this on a guest's cgroup v2", mnt, covered)
	}
	SkipOrFail(t, "the cgroup v2 hierarchy at "+mnt+" has no memory controller")
	return ""
}

// cgroupMounts reads /proc/self/mounts: the cgroup v2 mount ("" if none)
// and whether a cgroup v1 hierarchy holds the memory controller.
func cgroupMounts(t testing.TB) (v2 string, v1Memory bool) {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 4 {
			continue
		}
		switch fields[2] {
		case "cgroup2":
			if v2 == "" {
				v2 = fields[1]
			}
		case "cgroup":
			v1Memory = v1Memory || slices.Contains(strings.Split(fields[3], ","), "memory")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("reading /proc/self/mounts: %v", err)
	}
	return v2, v1Memory
}
