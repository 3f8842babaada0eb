//go:build !linux

package gvisor

import (
	"context"
	"errors"
)

// FindRunsc needs Linux, where the gvisor backend runs.
func FindRunsc(string) (string, error) { return "", errors.ErrUnsupported }

// ReadRunscVersion needs Linux, where the gvisor backend runs.
func ReadRunscVersion(context.Context, string) (RunscVersion, error) {
	return RunscVersion{}, errors.ErrUnsupported
}
