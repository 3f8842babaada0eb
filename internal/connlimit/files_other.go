//go:build !linux

package connlimit

import "errors"

// raiseFileLimit is Linux-only, as Warden's server is.
func raiseFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }
