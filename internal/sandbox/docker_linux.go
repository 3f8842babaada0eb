package sandbox

import (
	"context"
	"io"

	"github.com/warden-sandbox/warden/internal/docker"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Docker is the Docker backend: boxes are containers of one engine.
type Docker struct{ rt *docker.Runtime }

func newDocker(o BackendOptions) (Backend, error) {
	return &Docker{rt: &docker.Runtime{Image: o.Image}}, nil
}

// Name is "docker".
func (*Docker) Name() string { return "docker" }

// Start starts a session in a container.
func (d *Docker) Start(ctx context.Context, s spec.Spec) (Box, error) {
	sess, err := d.rt.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	return agentBox{sess}, nil
}

// Run runs s once in a fresh container.
func (d *Docker) Run(ctx context.Context, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	return runOnce(ctx, d, s, stdin, live)
}
