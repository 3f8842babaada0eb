package docker

import (
	"context"
	"strconv"

	"github.com/warden-sandbox/warden/internal/boxname"
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
		if pid, err := strconv.Atoi(c.Labels[Label]); err == nil && boxname.Dead(pid) {
			out = append(out, c.ID)
		}
	}
	return out, nil
}

// removeStale removes the containers and directories of Wardens that
// died.
func (r *Runtime) removeStale(ctx context.Context) {
	if ids, err := StaleContainers(ctx, r.engine); err == nil {
		for _, id := range ids {
			_ = r.engine.Remove(ctx, id)
		}
	}
	for _, dir := range boxname.StaleDirs(StateDir) {
		_ = boxname.RemoveDir(dir)
	}
}
