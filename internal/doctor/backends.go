package doctor

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// gvisorCheck runs /bin/true on the gvisor backend: runsc found is not
// runsc working (a platform the host cannot run, cgroups it cannot make).
// The backend is optional, so its absence is only a warning.
func gvisorCheck(ctx context.Context, o sandbox.BackendOptions) Check {
	c := Check{Name: "backend gvisor"}
	name := o.Runsc
	if name == "" {
		name = "runsc"
	}
	if _, err := exec.LookPath(name); err != nil {
		c.Status, c.Detail = Warn, "runsc not found: --backend gvisor is unavailable"
		c.Fix = "apt-get install runsc (or pass --runsc PATH)"
		return c
	}
	b, err := sandbox.NewBackend("gvisor", o)
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	l := spec.DefaultLimits
	l.Timeout = 30 * time.Second
	r, err := b.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, nil, sandbox.Stream{})
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, "runsc does not work here: "+err.Error()
		c.Fix = "run as root with cgroups; try --runsc-platform ptrace (kvm needs a guest-capable /dev/kvm)"
	case r.ExitCode != 0:
		c.Status, c.Detail = Warn, fmt.Sprintf("true exited %d in gVisor: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("ran true in gVisor in %.0f ms", r.WallTimeMS)
	}
	return c
}

// dockerCheck runs /bin/true on the docker backend when an engine
// answers; the backend is optional, so its absence is only a warning.
func dockerCheck(ctx context.Context) Check {
	c := Check{Name: "backend docker"}
	b, err := sandbox.NewBackend("docker", sandbox.BackendOptions{})
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	l := spec.DefaultLimits
	l.Timeout = 30 * time.Second
	r, err := b.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, nil, sandbox.Stream{})
	switch {
	case err != nil:
		c.Status, c.Detail = Warn, "--backend docker is unavailable: "+err.Error()
		c.Fix = "apt-get install docker.io and start dockerd (here: dockerd --iptables=false --bridge=none), or set DOCKER_HOST"
	case r.ExitCode != 0:
		c.Status, c.Detail = Warn, fmt.Sprintf("true exited %d in a container: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("ran true in a container in %.0f ms", r.WallTimeMS)
	}
	return c
}
