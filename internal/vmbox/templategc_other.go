//go:build !linux

package vmbox

import "errors"

// UnusedTemplateRoots needs Linux, where the microvm backend runs.
func UnusedTemplateRoots(string, func(string) bool) ([]string, error) {
	return nil, errors.ErrUnsupported
}

// RemoveTemplateRoots needs Linux, where the microvm backend runs.
func RemoveTemplateRoots(string, func(string) bool) ([]string, error) {
	return nil, errors.ErrUnsupported
}
