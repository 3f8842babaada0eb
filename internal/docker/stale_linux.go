package docker

import (
	"context"
	"os"
	"strconv"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/gvisor"
)

// StaleContainers lists the containers of Wardens that died, by the pid
// in their label.
func StaleContainers(ctx context.Context, e *Engine) ([]string, error) {
	cs, err := e.List(ctx, Label)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cs {
		if pid, err := strconv.Atoi(c.Labels[Label]); err == nil && pid != os.Getpid() && !cgroup.ProcessAlive(pid) {
			out = append(out, c.ID)
		}
	}
	return out, nil
}

// removeStale removes the containers and directories of Wardens that
// died. The directories are named as gVisor's are.
func (r *Runtime) removeStale(ctx context.Context) {
	if ids, err := StaleContainers(ctx, r.engine); err == nil {
		for _, id := range ids {
			_ = r.engine.Remove(ctx, id)
		}
	}
	for _, dir := range gvisor.Stale(StateDir) {
		_ = gvisor.RemoveStaleDir(dir)
	}
}
