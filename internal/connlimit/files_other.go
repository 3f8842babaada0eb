//go:build !linux

package connlimit

import "errors"

// RaiseFileLimit is Linux-only, as Warden's server is.
func RaiseFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }
