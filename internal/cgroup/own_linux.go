package cgroup

import (
	"path/filepath"
	"strconv"
	"strings"
)

// OwnLimits are the memory (bytes) and CPU (cores) the cgroups this
// process runs in allow it: the smallest memory limit and CPU quota from
// its own cgroup up to the top of the mounted hierarchy, 0 where none is
// set. A container or a systemd slice bounds warden this way, below what
// the host has.
func OwnLimits() (memory int64, cpus float64, err error) {
	s := current()
	if s.err != nil {
		return 0, 0, s.err
	}
	h := s.h
	switch h.version {
	case versionV1:
		memory = int64(ownMin(h, ctlMemory, memoryV1))
		cpus = ownMin(h, ctlCPU, cpuV1)
	case versionV2:
		memory = int64(ownMin(h, "", memoryV2))
		cpus = ownMin(h, "", cpuV2)
	}
	return memory, cpus, nil
}

// ownMin is the smallest positive value read finds from this process's
// cgroup in the hierarchy of controller (v1; "" for v2) up to the mount's
// top, or 0 when there is none.
func ownMin(h host, controller string, read func(dir string) float64) float64 {
	var m mount
	var ok bool
	own := h.self.V2
	if controller != "" {
		own = h.self.V1[controller]
		m, ok = findV1Mount(h.mounts, controller, own)
	} else {
		m, ok = findV2Mount(h.mounts, own)
	}
	if !ok {
		return 0
	}
	dir, err := ownDir(m, own)
	if err != nil {
		return 0
	}
	return minUp(dir, m.Point, read)
}

// minUp is the smallest positive value read finds in dir and each of its
// parents up to top, or 0.
func minUp(dir, top string, read func(dir string) float64) float64 {
	least := 0.0
	for {
		if v := read(dir); v > 0 && (least == 0 || v < least) {
			least = v
		}
		if dir == top || !strings.HasPrefix(dir, top) {
			return least
		}
		dir = filepath.Dir(dir)
	}
}

// noMemoryLimit is where v1 reports "no limit" (a huge page-rounded number).
const noMemoryLimit = 1 << 62

func memoryV1(dir string) float64 {
	v, err := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil || v >= noMemoryLimit {
		return 0
	}
	return float64(v)
}

func cpuV1(dir string) float64 {
	quota, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil || quota <= 0 {
		return 0
	}
	period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil || period <= 0 {
		return 0
	}
	return float64(quota) / float64(period)
}

func memoryV2(dir string) float64 {
	f := readFields(filepath.Join(dir, "memory.max"))
	if len(f) != 1 {
		return 0
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || v >= noMemoryLimit {
		return 0
	}
	return float64(v)
}

func cpuV2(dir string) float64 {
	f := readFields(filepath.Join(dir, "cpu.max"))
	if len(f) != 2 {
		return 0
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0 // "max": no quota
	}
	return float64(quota) / float64(period)
}

// readInt reads a one-number cgroup file that may hold -1.
func readInt(path string) (int64, error) {
	f := readFields(path)
	if len(f) != 1 {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// readFields is a small cgroup file's whitespace-separated fields, none
// when it cannot be read (a missing file sets no limit).
func readFields(path string) []string {
	b, err := readSmall(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}
