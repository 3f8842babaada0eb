//go:build !linux

package doctor

import "errors"

// Leaks is Linux-only: sandboxes exist only there.
func Leaks() ([]Leak, error) { return nil, errors.ErrUnsupported }
