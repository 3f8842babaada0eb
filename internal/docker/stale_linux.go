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
	// The next start retries what fails; doctor --leaks lists what stays.
	ids, err := StaleContainers(ctx, r.engine)
	if err != nil {
		r.logger().Warn("listing dead Wardens' containers", "err", err)
	}
	for _, id := range ids {
		if err := r.engine.Remove(ctx, id); err != nil {
			r.logger().Warn("removing a dead Warden's container", "box", id, "err", err)
		}
	}
	for _, dir := range gvisor.Stale(StateDir) {
		if err := gvisor.RemoveStaleDir(dir); err != nil {
			r.logger().Warn("removing a dead Warden's box directory", "dir", dir, "err", err)
		}
	}
}
