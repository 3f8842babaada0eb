//go:build !linux

package gvisor

import "errors"

// UnusedTemplateRoots needs Linux, where the gvisor backend runs.
func UnusedTemplateRoots(string, func(string) bool) ([]string, error) {
	return nil, errors.ErrUnsupported
}

// RemoveTemplateRoots needs Linux, where the gvisor backend runs.
func RemoveTemplateRoots(string, func(string) bool) ([]string, error) {
	return nil, errors.ErrUnsupported
}
