//go:build !linux

package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Run is unavailable off Linux: the native backend is Linux namespaces.
func Run(context.Context, spec.Spec, IO) (spec.Result, error) {
	err := fmt.Errorf("native backend: %w", errors.ErrUnsupported)
	return spec.Result{Error: err.Error()}, err
}
