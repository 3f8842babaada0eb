package sandbox

import (
	"errors"
	"fmt"
)

func newDocker(BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend docker: %w", errors.ErrUnsupported)
}
