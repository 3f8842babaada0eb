//go:build !linux

package doctor

import "errors"

// Leaks is Linux-only: sandboxes exist only there.
func Leaks(string) ([]Leak, error) { return nil, errors.ErrUnsupported }
