//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
)

// newGVisor is Linux-only, as runsc is.
func newGVisor(name string, _ BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend %s: %w", name, errors.ErrUnsupported)
}

// newDocker is Linux-only: boxes bind Linux host paths.
func newDocker(name string, _ BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend %s: %w", name, errors.ErrUnsupported)
}

// newMicroVM is Linux-only: QEMU's confinement is Linux's.
func newMicroVM(name string, _ BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend %s: %w", name, errors.ErrUnsupported)
}
