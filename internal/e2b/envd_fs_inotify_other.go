//go:build !linux

package e2b

import (
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/workspace"
)

// inotifyTree is Linux-only: watching needs inotify.
type inotifyTree struct{}

// startWatch is Linux-only.
func startWatch(dir workspace.Files, root string, recursive bool) (*inotifyTree, error) {
	return nil, fmt.Errorf("watching %q: %w", e2bPath(root), errors.ErrUnsupported)
}

func (t *inotifyTree) read() ([]change, error) { return nil, errors.ErrUnsupported }

// Close has nothing to release.
func (t *inotifyTree) Close() error { return nil }
