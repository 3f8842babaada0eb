//go:build !linux

package native

import (
	"context"
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Run is Runtime.Run with the default logger.
func Run(ctx context.Context, s spec.Spec, stdio IO) (spec.Result, error) {
	return Runtime{}.Run(ctx, s, stdio)
}

// Run is unavailable off Linux: the native backend is Linux namespaces.
func (Runtime) Run(context.Context, spec.Spec, IO) (spec.Result, error) {
	err := fmt.Errorf("native backend: %w", errors.ErrUnsupported)
	return spec.Result{Error: err.Error()}, err
}
