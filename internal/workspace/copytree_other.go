//go:build !linux

package workspace

import (
	"context"
	"errors"
	"fmt"
)

// CopyTree is Linux-only: it relies on openat2(2).
func CopyTree(ctx context.Context, src, dst string, maxBytes int64) (TreeCopy, error) {
	return TreeCopy{}, fmt.Errorf("copying %s: %w", src, errors.ErrUnsupported)
}
