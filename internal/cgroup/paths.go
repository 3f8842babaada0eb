package cgroup

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// parentDir is the directory that holds every sandbox's cgroup: under the caller's own cgroup
// on v1, under the v2 base (see v2Layout) on v2.
const parentDir = "warden"

// cfsPeriodUS is the CFS bandwidth period: the kernel's default, 100ms. A shorter period
// throttles more smoothly but costs scheduler overhead; 100ms is what runc and Docker use.
const cfsPeriodUS = 100000

// minCFSQuotaUS is the smallest quota the kernel accepts (1ms).
const minCFSQuotaUS = 1000

// ownDir returns the directory of the caller's own cgroup under a mount, given the cgroup's
// path from /proc/self/cgroup. The mount may show a subtree (a container's bind mount, or a
// cgroup namespace), whose top is m.Root: the own path must lie inside it.
func ownDir(m mount, procPath string) (string, error) {
	rel, err := filepath.Rel(m.Root, procPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("own cgroup %q is outside the cgroup mount at %s (which shows %q)", procPath, m.Point, m.Root)
	}
	return filepath.Join(m.Point, rel), nil
}

// findV1Mount returns the first v1 mount holding controller, preferring one whose root
// contains the process's own cgroup (a host can mount a hierarchy more than once).
func findV1Mount(mounts []mount, controller, procPath string) (mount, bool) {
	return findMount(mounts, procPath, func(m mount) bool {
		return !m.V2 && slices.Contains(m.Controllers, controller)
	})
}

// findV2Mount returns the unified hierarchy's mount, preferring one that contains procPath.
func findV2Mount(mounts []mount, procPath string) (mount, bool) {
	return findMount(mounts, procPath, func(m mount) bool { return m.V2 })
}

// findMount returns the first mount that match accepts, preferring one whose root contains
// procPath.
func findMount(mounts []mount, procPath string, match func(mount) bool) (mount, bool) {
	var first mount
	found := false
	for _, m := range mounts {
		if !match(m) {
			continue
		}
		if _, err := ownDir(m, procPath); err == nil {
			return m, true
		}
		if !found {
			first, found = m, true
		}
	}
	return first, found
}

// validateLimits rejects limits the kernel would refuse or that make no sense, so the error
// names the limit rather than a cgroup file.
func validateLimits(l Limits) error {
	if l.MemoryBytes < 0 {
		return fmt.Errorf("memory limit %d is negative", l.MemoryBytes)
	}
	if l.Pids < 0 {
		return fmt.Errorf("pids limit %d is negative", l.Pids)
	}
	if _, err := cfsQuota(l.CPUs); err != nil {
		return err
	}
	return nil
}

// cfsQuota converts a CPU count into a CFS quota per cfsPeriodUS, in microseconds; 0 means no
// limit. Fractions of a CPU below the kernel's 1ms minimum are refused, not rounded up, so that
// the limit applied is the one asked for.
func cfsQuota(cpus float64) (int64, error) {
	switch {
	case math.IsNaN(cpus) || math.IsInf(cpus, 0) || cpus < 0:
		return 0, fmt.Errorf("cpus limit %v is not a positive number", cpus)
	case cpus == 0:
		return 0, nil
	case cpus > 1<<20:
		return 0, fmt.Errorf("cpus limit %v is too large", cpus)
	}
	q := int64(math.Round(cpus * cfsPeriodUS))
	if q < minCFSQuotaUS {
		return 0, fmt.Errorf("cpus limit %v is below the kernel's minimum of %v", cpus, float64(minCFSQuotaUS)/cfsPeriodUS)
	}
	return q, nil
}

// cpuWeight is the scheduling weight of a sandbox with a CPU limit of
// cpus, in the kernel's units where one CPU's worth is unit (v1
// cpu.shares 1024, v2 cpu.weight 100), at least lo: proportional to its
// quota below one CPU, and the default at one CPU or more. The quota caps
// what a sandbox may use; the weight says who runs first while capped
// sandboxes contend, so twelve neighbours capped at 0.1 CPU each weigh
// 1.2 CPUs against one sandbox of a whole CPU rather than twelve to one.
// It never rises above the default: a quota is whatever a tenant asks for
// under the ceiling, admitted against no one's capacity, so a sandbox
// asking for sixteen CPUs must not outweigh its neighbours sixteen to one.
// Zero means leave the kernel's default: no limit, or one CPU or more,
// which also spares a write per sandbox.
func cpuWeight(cpus float64, unit, lo int64) int64 {
	if cpus <= 0 || cpus >= 1 || math.IsNaN(cpus) {
		return 0
	}
	return max(int64(math.Round(cpus*float64(unit))), lo)
}

// required returns the controllers a sandbox's limits depend on.
func required(l Limits) map[string]bool {
	r := make(map[string]bool, 3)
	if l.MemoryBytes > 0 {
		r[ctlMemory] = true
	}
	if l.Pids > 0 {
		r[ctlPids] = true
	}
	if l.CPUs > 0 {
		r[ctlCPU] = true
	}
	return r
}
