//go:build !linux

package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// CopyN is Linux-only, as every Dir operation is.
func CopyN(dst *os.File, r io.Reader, n int64) (int64, error) {
	return 0, fmt.Errorf("copying into %s: %w", dst.Name(), errors.ErrUnsupported)
}
