package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// BackendOptions are the settings of the backends that need any.
type BackendOptions struct {
	// Runsc is the gvisor backend's runsc binary ("" finds it on PATH).
	Runsc string
	// Platform is runsc's platform ("" is runsc's default).
	Platform string
	// Image is the docker backend's image ("" builds Warden's own root).
	Image string
	// Server says the process will hold many sandboxes at once (warden
	// serve, warden mcp): the native backend then starts sessions from a
	// small spawner process instead of forking this large one.
	Server bool
}

// BackendNames are the backends by name, in the order flags list them.
var BackendNames = []string{"native", "gvisor", "docker"}

// NewBackend returns the backend called name.
func NewBackend(name string, o BackendOptions) (Backend, error) {
	switch name {
	case "native", "":
		if o.Server {
			useSpawner()
		}
		return Native{}, nil
	case "gvisor":
		return newGVisor(o)
	case "docker":
		return newDocker(o)
	}
	return nil, fmt.Errorf("%w: backend %q is unknown: use native, gvisor or docker", spec.ErrInvalid, name)
}

// ended says the box has ended.
func ended(b Box) bool {
	select {
	case <-b.Done():
		return true
	default:
		return false
	}
}

// runOnce is Run for a backend whose boxes only exist as sessions: a box
// for one exec, closed after it. Timeouts and kills are then exactly a
// session exec's, the same in every backend.
func runOnce(ctx context.Context, b Backend, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	if err := s.Validate(); err != nil {
		return spec.Result{}, err
	}
	begin := time.Now()
	box, err := b.Start(ctx, s)
	if err != nil {
		return spec.Result{}, err
	}
	defer box.Close()
	timeout := s.Limits.Timeout
	if timeout <= 0 {
		timeout = spec.MaxTimeout
	}
	r, err := box.Exec(ctx, Command{Argv: s.Command, Stdin: stdin, Timeout: timeout}, live)
	if err != nil && ended(box) && s.Limits.MemoryBytes > 0 {
		err = fmt.Errorf("%w (the whole sandbox ended during the run; on the %s backend a program over --memory %s ends it)", err, b.Name(), spec.FormatSize(s.Limits.MemoryBytes))
	}
	r.Network = box.NetworkEvents()
	r.WallTimeMS = float64(time.Since(begin).Microseconds()) / 1000
	return r, err
}
