//go:build !linux

package kubeback

import (
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// New is Linux-only: a Pod's box is an agent session, which exists on
// Linux only.
func New(name string, _ Config) (sandbox.Backend, error) {
	return nil, fmt.Errorf("backend %s: %w", name, errors.ErrUnsupported)
}
