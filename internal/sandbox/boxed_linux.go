package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/docker"
	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/vmbox"
)

// boxed is a backend whose boxes a runtime builds around Warden's agent
// (gVisor, Docker, a microVM): start makes one, and a one-shot run is a box with one
// exec (runOnce).
type boxed struct {
	name  string
	start func(context.Context, spec.Spec) (*agent.Session, error)
}

// newGVisor is the gvisor backend, called name in the backend table.
func newGVisor(name string, o BackendOptions) (Backend, error) {
	rt := &gvisor.Runtime{Runsc: o.Runsc, Platform: o.Platform, Logger: o.Logger, Stream: o.AgentTransport == native.TransportStream}
	return gvisorBackend{boxed{name: name, start: rt.Start}, rt}, nil
}

// gvisorBackend is the gvisor backend: a boxed one that saves boxes
// whole (MemoryBackend) over the stream transport, where every process's
// pipes are the box's own.
type gvisorBackend struct {
	boxed
	rt *gvisor.Runtime
}

// SavesMemory refuses a box over descriptors (its interpreters' pipes
// are the host's, which gVisor cannot save) and one with the egress
// proxy (a host socket).
func (g gvisorBackend) SavesMemory(s spec.Spec) error {
	switch {
	case !g.rt.Stream:
		return fmt.Errorf("%w: over the descriptor transport its processes hold the host's pipes; start warden with --agent-transport stream to keep memory", ErrCannotSave)
	case s.Network.Mode == spec.NetProxy:
		return fmt.Errorf("%w: its link to the egress proxy is a host socket", ErrCannotSave)
	}
	return nil
}

// SaveMemory checkpoints box (gvisor.Runtime.Checkpoint).
func (g gvisorBackend) SaveMemory(ctx context.Context, box Box, dir string) error {
	ab, ok := box.(agentBox)
	if !ok {
		return fmt.Errorf("%w: not a gvisor box", ErrCannotSave)
	}
	err := g.rt.Checkpoint(ctx, ab.Session, dir, gvisor.CheckpointOptions{})
	if errors.Is(err, gvisor.ErrCannotCheckpoint) {
		return fmt.Errorf("%w: %w", ErrCannotSave, err)
	}
	return err
}

// RestoreMemory starts a box from a checkpoint (gvisor.Runtime.Restore).
func (g gvisorBackend) RestoreMemory(ctx context.Context, s spec.Spec, dir string) (Box, error) {
	sess, err := g.rt.Restore(ctx, s, dir)
	if err != nil {
		return nil, err
	}
	return agentBox{sess}, nil
}

// newDocker is the docker backend, called name in the backend table.
func newDocker(name string, o BackendOptions) (Backend, error) {
	rt := &docker.Runtime{Image: o.Image, Logger: o.Logger}
	return boxed{name: name, start: rt.Start}, nil
}

// newMicroVM is the microvm backend, called name in the backend table:
// each box a QEMU microVM with its own guest kernel.
func newMicroVM(name string, o BackendOptions) (Backend, error) {
	rt := &vmbox.Runtime{Logger: o.Logger}
	return microVM{boxed{name: name, start: rt.Start}}, nil
}

// microVM is the microvm backend: a boxed one whose pooled boxes are
// warmed (Warmer).
type microVM struct{ boxed }

// WarmUp is vmbox's warm-up command.
func (microVM) WarmUp() []string { return vmbox.WarmUp() }

// Name is the backend's name.
func (b boxed) Name() string { return b.name }

// Start starts a session in a new box.
func (b boxed) Start(ctx context.Context, s spec.Spec) (Box, error) {
	sess, err := b.start(ctx, s)
	if err != nil {
		return nil, err
	}
	return agentBox{sess}, nil
}

// Run runs s once in a fresh box.
func (b boxed) Run(ctx context.Context, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	return runOnce(ctx, b, s, stdin, live)
}
