//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Native is the Linux namespaces backend; elsewhere it refuses to start.
type Native struct {
	// Logger, Executor and AgentTransport are unused off Linux, kept so
	// callers build everywhere.
	Logger         *slog.Logger
	Executor       native.Executor
	AgentTransport native.AgentTransport
}

// Name is DefaultBackend, native's name in the backend table.
func (Native) Name() string { return DefaultBackend }

// Start returns errors.ErrUnsupported: namespaces exist only on Linux.
func (Native) Start(context.Context, spec.Spec) (Box, error) { return nil, errors.ErrUnsupported }

// Run returns errors.ErrUnsupported: namespaces exist only on Linux.
func (Native) Run(context.Context, spec.Spec, io.Reader, Stream) (spec.Result, error) {
	return spec.Result{}, errors.ErrUnsupported
}

// useSpawner has nothing to do off Linux.
func useSpawner() {}
