//go:build !linux

package connlimit

import "errors"

// raiseFileLimit is Linux-only, as Warden's server is.
func raiseFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }

// ceiling is the limit as it stands off Linux, where nothing raises it.
func ceiling(nofile uint64) uint64 { return nofile }
