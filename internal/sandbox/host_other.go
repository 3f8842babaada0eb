//go:build !linux

package sandbox

import (
	"errors"
	"runtime"
)

// AvailableMemory is unknown off Linux.
func AvailableMemory() (int64, error) { return 0, errors.ErrUnsupported }

// availableCPUs is the host's cores: there are no cgroups off Linux.
func availableCPUs() float64 { return float64(runtime.NumCPU()) }
