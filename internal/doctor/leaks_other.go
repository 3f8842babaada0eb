//go:build !linux

package doctor

import "errors"

// Leaks is Linux-only: sandboxes exist only there.
func Leaks() ([]Leak, error) { return nil, errors.ErrUnsupported }

// TemplateRoots is Linux-only, as gVisor and microVM boxes are:
// elsewhere there are no roots.
func TemplateRoots(string) []Leak { return nil }
