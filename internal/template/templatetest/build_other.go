//go:build !linux

package templatetest

import (
	"context"
	"errors"
	"io"
)

// Build needs Linux: its images are Debian roots made with mmdebstrap.
func Build(ctx context.Context, log io.Writer) (string, error) {
	return "", errors.ErrUnsupported
}
