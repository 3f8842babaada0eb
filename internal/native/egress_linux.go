package native

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/spec"
)

// attachEgress gives the sandbox its own socket on the proxy, and the init
// a way to it, when the spec asks for the proxy.
func (b *box) attachEgress(name string) error {
	n := b.spec.Network
	if n.Mode != spec.NetProxy {
		return nil
	}
	var err error
	if b.egress, err = agent.AttachEgress(name, n, b.spec.Limits.CPUs); err != nil {
		return err
	}
	fd, err := unix.Open(b.egress.SocketPath(), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the egress socket: %w", err)
	}
	b.child.egress = os.NewFile(uintptr(fd), "egress")
	return nil
}

// env is a process's environment in this sandbox: the base, the proxy's
// when there is one, then extra.
func (b *box) env(extra []string) []string {
	return agent.ImageEnv(b.egress != nil, b.spec.Root.Env, extra)
}

// egressPace paces the bridge (see egress.ConnPace), or is the zero Pace
// without the proxy.
func (b *box) egressPace() egress.Pace {
	if b.egress == nil {
		return egress.Pace{}
	}
	return egress.ConnPace(b.spec.Limits.CPUs)
}

// egressPort is the bridge's port, or 0 without the proxy.
func (b *box) egressPort() int {
	if b.egress == nil {
		return 0
	}
	return agent.EgressPort
}
