//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
)

func newGVisor(BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend gvisor: %w", errors.ErrUnsupported)
}

func newDocker(BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend docker: %w", errors.ErrUnsupported)
}
