package sandbox

import (
	"context"
	"io"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/spec"
)

// GVisor is the gVisor backend: boxes run by runsc.
type GVisor struct{ rt *gvisor.Runtime }

func newGVisor(o BackendOptions) (Backend, error) {
	return &GVisor{rt: &gvisor.Runtime{Runsc: o.Runsc, Platform: o.Platform}}, nil
}

// Name is "gvisor".
func (*GVisor) Name() string { return "gvisor" }

// Start starts a gVisor session.
func (g *GVisor) Start(ctx context.Context, s spec.Spec) (Box, error) {
	sess, err := g.rt.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	return agentBox{sess}, nil
}

// Run runs s once in a fresh gVisor box.
func (g *GVisor) Run(ctx context.Context, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	return runOnce(ctx, g, s, stdin, live)
}
