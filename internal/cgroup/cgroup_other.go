//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
)

// New is Linux-only: cgroups are a Linux kernel feature.
func New(name string, l Limits) (Cgroup, error) {
	return nil, fmt.Errorf("creating cgroup %q: %w", name, errors.ErrUnsupported)
}

// RemoveStale has nothing to remove where there are no cgroups.
func RemoveStale(dead func(pid int) bool) error {
	return nil
}

// Probe reports that this platform has no cgroups.
func Probe() Report {
	r := Report{Mode: "none", Reason: "cgroups exist only on Linux", NoFreeze: "cgroups exist only on Linux"}
	for _, ctl := range []string{ctlMemory, ctlPids, ctlCPU} {
		r.Controllers = append(r.Controllers, ControllerReport{Name: ctl, Reason: r.Reason})
	}
	return r
}

// Parents is empty where there are no cgroups.
func Parents() []string { return nil }

// Version is empty: no cgroup hierarchy exists off Linux.
func Version() string { return "" }

// Stale finds nothing: no cgroup hierarchy exists off Linux.
func Stale(func(pid int) bool) ([]string, error) { return nil, nil }

// OpenFreezer is Linux-only: cgroups are a Linux kernel feature.
func OpenFreezer(name string) (Freezer, error) {
	return nil, fmt.Errorf("opening cgroup %q to freeze it: %w", name, errors.ErrUnsupported)
}
