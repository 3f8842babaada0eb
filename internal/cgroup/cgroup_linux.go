package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// Which hierarchy Warden uses; also Report.Version.
const (
	versionV1 = "v1"
	versionV2 = "v2"
)

// New creates the sandbox's cgroup and applies l. name must come from boxname.New. On v1 that is
// <own>/warden/<name> in the memory, pids, cpu and cpuacct hierarchies; on v2 it is
// <base>/warden/<name> in the unified hierarchy, with the memory, pids and cpu controllers
// (see v2Layout for where base is).
//
// A limit in l whose controller is missing or not writable makes New fail with a
// *ControllerError (wrapping ErrControllerUnavailable); nothing is left behind. Controllers
// no limit needs are used when they can be, for Stats. With no limit at all and no writable
// cgroup anywhere, New fails with an error wrapping ErrNoCgroup, and the caller runs the
// sandbox without a cgroup, taking CPU time and peak memory from rusage instead.
//
// New is on every sandbox's critical path: what it learns about the host (mounts, own cgroup,
// the v2 setup) it learns on the first call, and later calls only create the directories and
// write the limits.
func New(name string, l Limits) (Cgroup, error) {
	if err := validateName(name, os.Getpid()); err != nil {
		return nil, err
	}
	if err := validateLimits(l); err != nil {
		return nil, err
	}
	s := current()
	if s.err != nil {
		return nil, s.err
	}
	switch s.h.version {
	case versionV1:
		c, _, err := createV1(s.v1, name, l)
		if err != nil {
			return nil, err // not c: a nil *v1Cgroup would make a non-nil Cgroup
		}
		return c, nil
	case versionV2:
		c, _, err := createV2(s.v2, name, l)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	for _, ctl := range []string{ctlMemory, ctlPids, ctlCPU} {
		if required(l)[ctl] {
			return nil, &ControllerError{Controller: ctl, Problem: "is not mounted on this host", Fix: fixMount}
		}
	}
	return nil, fmt.Errorf("%w: no cgroup hierarchy is mounted", ErrNoCgroup)
}

// host is what Warden learns about the machine: the cgroup mounts and the caller's own
// cgroups.
type host struct {
	// mode is Report.Mode: "v1", "hybrid", "v2" or "none".
	mode    string
	version string
	mounts  []mount
	self    procCgroup
}

// system is the per-process view of the host, made on first use: hierarchies are mounted at
// boot and a process's own cgroup changes only when something moves it, which for Warden means
// v2Layout.moveToLeaf, whose result the layout remembers.
type system struct {
	h   host
	err error
	v1  *v1Layout // when h.version is v1
	v2  *v2Layout // when h.version is v2
}

var (
	sysOnce sync.Once
	sysVal  system
)

// current returns the per-process view of the host, reading it on the first call.
func current() *system {
	sysOnce.Do(func() {
		h, err := readHost()
		sysVal = system{h: h, err: err}
		switch {
		case err != nil:
		case h.version == versionV1:
			sysVal.v1 = newV1Layout(h)
		case h.version == versionV2:
			sysVal.v2 = newV2Layout(h, writable)
		}
	})
	return &sysVal
}

// readHost reads the mount table and the caller's own cgroups.
func readHost() (host, error) {
	b, err := readSmall("/proc/self/mountinfo")
	if err != nil {
		return host{}, fmt.Errorf("reading mount table: %w", err)
	}
	mounts, err := parseMountInfo(strings.NewReader(string(b)))
	if err != nil {
		return host{}, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	b, err = readSmall("/proc/self/cgroup")
	if err != nil {
		return host{}, fmt.Errorf("reading own cgroup: %w", err)
	}
	self, err := parseProcCgroup(strings.NewReader(string(b)))
	if err != nil {
		return host{}, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	mode := hostMode(mounts)
	return host{mode: mode, version: chooseVersion(mode, mounts), mounts: mounts, self: self}, nil
}

// unifiedPoint is where a host that uses only cgroup v2 mounts it.
const unifiedPoint = "/sys/fs/cgroup"

// hostMode names how the host mounts cgroups, for Report.Mode: "v2" when the unified hierarchy
// is at /sys/fs/cgroup or there is no v1 controller; "hybrid" for v1 controllers beside a v2
// hierarchy (systemd's hybrid layout, as on this project's development host); "v1"; "none".
func hostMode(mounts []mount) string {
	v1, v2 := false, false
	for _, m := range mounts {
		switch {
		case m.V2 && m.Point == unifiedPoint:
			return "v2"
		case m.V2:
			v2 = true
		case len(m.Controllers) > 0:
			v1 = true
		}
	}
	switch {
	case v1 && v2:
		return "hybrid"
	case v1:
		return "v1"
	case v2:
		return "v2"
	}
	return "none"
}

// chooseVersion picks the hierarchy: v2 on a unified host; else v1 wherever a v1 controller
// Warden uses is mounted (on a hybrid host the v2 hierarchy then has none of them); else v2
// if it is mounted at all.
func chooseVersion(mode string, mounts []mount) string {
	if mode == "v2" {
		return versionV2
	}
	for _, m := range mounts {
		for _, c := range m.Controllers {
			// The freezer alone does not make a host v1: it limits nothing.
			if c != ctlFreezer && slices.Contains(v1Controllers, c) {
				return versionV1
			}
		}
	}
	for _, m := range mounts {
		if m.V2 {
			return versionV2
		}
	}
	return ""
}

// staleBases are the warden/ directories RemoveStale lists: where this process creates its
// cgroups.
func (s *system) staleBases() []string {
	var bases []string
	switch {
	case s.v1 != nil:
		for _, hr := range s.v1.hiers {
			bases = append(bases, hr.base)
		}
	case s.v2 != nil && s.v2.err == nil:
		bases = []string{s.v2.base + "/" + parentDir}
	}
	return bases
}

// RemoveStale removes the cgroups that crashed Wardens left behind: it lists warden/ in each
// hierarchy (where New creates cgroups: under the own cgroup on v1; on v2 under the
// hierarchy's top as root, under the delegated cgroup otherwise) and removes every entry whose
// name starts with the pid of an owner that dead judges gone and which holds no processes. It
// costs a stat per hierarchy, and a listing of those that hold a cgroup (subdirs), with dead
// asked once per owner while listing, so it can run on every start, and again right
// before each removal, so a pid reused meanwhile keeps its cgroups. A live owner's
// cgroups are never touched; neither are names Warden did not make. dead is boxname.Dead
// (tests pass their own); owners in another pid namespace that share this directory would look
// dead, so Wardens in different pid namespaces need different places (as root on v2, different
// cgroup namespaces).
func RemoveStale(dead func(pid int) bool) error {
	stale, err := Stale(dead)
	errs := []error{err, endAllFrozen(stale, dead)}
	for _, dir := range stale {
		// Stale asked once per owner for every hierarchy; the owner's pid
		// may have been reused since, so it is asked again (a signal 0)
		// right before each removal, which keeps that window short.
		if pid, ok := boxname.OwnerPID(filepath.Base(dir)); !ok || !dead(pid) {
			continue
		}
		if err := removeStaleDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stale lists what RemoveStale would remove: the cgroup directories, in
// every hierarchy, named after an owner pid that dead judges gone (see
// RemoveStale). They may still hold processes, which RemoveStale leaves.
func Stale(dead func(pid int) bool) ([]string, error) {
	s := current()
	if s.err != nil {
		return nil, s.err
	}
	var stale []string
	var errs []error
	judged := make(map[int]bool) // pid -> dead, asked once for every hierarchy
	for _, base := range s.staleBases() {
		names, err := subdirs(base)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
				errs = append(errs, fmt.Errorf("listing stale cgroups: %w", err))
			}
			continue
		}
		for _, name := range names {
			pid, ok := boxname.OwnerPID(name)
			if !ok {
				continue
			}
			gone, seen := judged[pid]
			if !seen {
				gone = dead(pid)
				judged[pid] = gone
			}
			if gone {
				stale = append(stale, base+"/"+name)
			}
		}
	}
	return stale, errors.Join(errs...)
}

// subdirs lists the directories in dir, in no order. A directory whose
// link count is 2 holds none (cgroupfs, as tmpfs and ext4, counts each
// subdirectory's ".." link), so it is not read at all: a sweep of a host
// without sandboxes costs a stat per hierarchy. Any other count, on a
// filesystem that counts otherwise (1 on btrfs), reads the directory.
func subdirs(dir string) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Nlink == 2 {
		return nil, nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", dir, cerr)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, err
}

// Version is the hierarchy New uses on this host: "v1", "v2", or "" when
// none is mounted. It is cheap (the host is read once per process), so a
// caller can decide how a process will be placed before creating anything:
// on v2 the cgroup must exist before the clone (CLONE_INTO_CGROUP), on v1
// it may be created while the process starts (see Placement.ThreadFiles).
func Version() string {
	s := current()
	if s.err != nil {
		return ""
	}
	return s.h.version
}
