//go:build !linux

package cgroup

import "errors"

// OwnLimits is Linux-only: cgroups are a Linux kernel feature.
func OwnLimits() (memory int64, cpus float64, err error) { return 0, 0, errors.ErrUnsupported }
