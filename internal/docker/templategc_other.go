//go:build !linux

package docker

import (
	"context"
	"errors"
)

// RemoveTemplateImages needs Linux, where the docker backend runs.
func RemoveTemplateImages(context.Context, string, func(string) bool) ([]string, error) {
	return nil, errors.ErrUnsupported
}
