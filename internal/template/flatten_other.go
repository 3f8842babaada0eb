//go:build !linux

package template

import "errors"

// link is Linux-only: the store needs linkat relative to a directory.
func (f *flattener) link(src, rel string) error {
	return errors.ErrUnsupported
}
