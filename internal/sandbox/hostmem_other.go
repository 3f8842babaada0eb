//go:build !linux

package sandbox

import "errors"

// hostMemory is unknown off Linux.
func hostMemory() (int64, error) { return 0, errors.ErrUnsupported }
