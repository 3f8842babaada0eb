//go:build !linux

package sandbox

import "errors"

// hostMemory is unknown off Linux.
func hostMemory() (int64, error) { return 0, errors.ErrUnsupported }

// hardLimits are unknown off Linux.
func hardLimits() (openFiles, procs int64) { return -1, -1 }
