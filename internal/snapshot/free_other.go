//go:build !linux

package snapshot

import (
	"errors"
	"fmt"
)

// checkFree is Linux-only, like the sandboxes snapshots are taken of.
func (s *Store) checkFree() error {
	return fmt.Errorf("checking the free space of the snapshot directory: %w", errors.ErrUnsupported)
}

// Room cannot check the free space here.
func (s *Store) Room(int64) error {
	return fmt.Errorf("checking the free space of the snapshot directory: %w", errors.ErrUnsupported)
}
