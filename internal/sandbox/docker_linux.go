package sandbox

import (
	"errors"
	"fmt"
)

// newDocker refuses: the Docker backend is not built yet, and a refusal
// that says so beats a backend that pretends.
func newDocker(BackendOptions) (Backend, error) {
	return nil, fmt.Errorf("backend %q is not built yet: use --backend native or gvisor: %w", "docker", errors.ErrUnsupported)
}
