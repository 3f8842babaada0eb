package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

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

// newGVisor is the gvisor backend, called name in the backend table. A
// runsc that cannot write gvisor.CompressionFast's images, which only
// its help tells, is warned of once here, at the server's start.
func newGVisor(name string, o BackendOptions) (Backend, error) {
	rt := &gvisor.Runtime{Runsc: o.Runsc, Platform: o.Platform, Logger: o.Logger, Stream: o.AgentTransport == native.TransportStream,
		Compression: o.SnapshotCompression}
	if o.SnapshotCompression == gvisor.CompressionFast {
		if err := rt.WritesCompression(gvisor.CompressionFast); err != nil {
			logger := o.Logger
			if logger == nil {
				logger = slog.Default()
			}
			logger.Warn("--snapshot-compression fast is not honoured", "err", err)
		}
	}
	return gvisorBackend{boxed{name: name, start: rt.Start}, rt}, nil
}

// gvisorBackend is the gvisor backend: a boxed one that saves boxes
// whole (MemoryBackend) over the stream transport, where every process's
// pipes are the box's own.
type gvisorBackend struct {
	boxed
	rt *gvisor.Runtime
}

// SavesMemory refuses a box over descriptors: its interpreters' pipes
// and its egress link are the host's, which gVisor cannot save. Over the
// stream a box with the egress proxy is saved too, where the runsc can
// save its bridge's listening socket (gvisor.Runtime.SavesEgress): its
// way out is the stream's channels, and its restore gets a new proxy
// socket with the spec it is restored with (gvisor.Runtime.Restore).
func (g gvisorBackend) SavesMemory(s spec.Spec) error {
	if !g.rt.Stream {
		return fmt.Errorf("%w: over the descriptor transport its processes hold the host's pipes; start warden with --agent-transport stream (gvisor's default) to keep memory", ErrCannotSave)
	}
	if s.Network.Mode == spec.NetProxy {
		if err := g.rt.SavesEgress(); err != nil {
			return fmt.Errorf("%w: %w", ErrCannotSave, err)
		}
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

// Loaded is closed once box's memory, restored by RestoreMemory, has
// loaded in the background (gvisor.Runtime.Loaded), and at once for a
// box that is no gvisor box.
func (g gvisorBackend) Loaded(box Box) <-chan struct{} {
	ab, ok := box.(agentBox)
	if !ok {
		return g.rt.Loaded(nil)
	}
	return g.rt.Loaded(ab.Session)
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
