//go:build !linux

package plan

import (
	"errors"
	"fmt"
)

// Apply is unavailable off Linux: the ops are Linux system calls.
func Apply([]Op) error { return fmt.Errorf("applying a plan: %w", errors.ErrUnsupported) }
