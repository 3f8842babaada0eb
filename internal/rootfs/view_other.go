//go:build !linux

package rootfs

import "errors"

// ReadViewSource needs a Linux procfs to read the host's figures from.
func ReadViewSource(proc string, v View) (ViewSource, error) {
	return ViewSource{}, errors.ErrUnsupported
}
