//go:build !linux

package microvm

import (
	"context"
	"errors"
	"net"
)

// VM is a running microVM; there are none off Linux.
type VM struct{}

// Start fails off Linux: QEMU's confinement here is Linux's.
func Start(context.Context, Config) (*VM, error) { return nil, errors.ErrUnsupported }

// Stream is unreachable off Linux.
func (*VM) Stream() net.Conn { return nil }

// Boot is unreachable off Linux.
func (*VM) Boot() Boot { return Boot{} }

// Accel is unreachable off Linux.
func (*VM) Accel() AccelChoice { return AccelChoice{} }

// Pid is unreachable off Linux.
func (*VM) Pid() int { return 0 }

// Done is unreachable off Linux.
func (*VM) Done() <-chan struct{} { return nil }

// Wait is unreachable off Linux.
func (*VM) Wait() error { return errors.ErrUnsupported }

// Console is unreachable off Linux.
func (*VM) Console() []string { return nil }

// Kill is unreachable off Linux.
func (*VM) Kill() {}

// Close is unreachable off Linux.
func (*VM) Close() error { return errors.ErrUnsupported }

// QEMUVersion needs Linux.
func QEMUVersion(context.Context, string) (string, error) { return "", errors.ErrUnsupported }

// Pause is unreachable off Linux.
func (*VM) Pause(context.Context) error { return errors.ErrUnsupported }

// Resume is unreachable off Linux.
func (*VM) Resume(context.Context) error { return errors.ErrUnsupported }
