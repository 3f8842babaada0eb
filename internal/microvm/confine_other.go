//go:build !linux

package microvm

import "errors"

// CheckConfinement fails off Linux: QEMU's confinement is Linux's.
func CheckConfinement() error { return errors.ErrUnsupported }
