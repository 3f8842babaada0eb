package docker

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// StaleContainers lists the containers of Wardens that died, by the pid
// in their label.
func StaleContainers(ctx context.Context, e *Engine) ([]string, error) {
	return staleContainers(ctx, e)
}

// staleContainers is StaleContainers against any engine: only containers
// carrying Label whose pid names a dead Warden (boxname.Dead).
func staleContainers(ctx context.Context, e engineAPI) ([]string, error) {
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
// died. The next start retries what fails; doctor --leaks lists what
// stays.
func (r *Runtime) removeStale(ctx context.Context) {
	removeStaleContainers(ctx, r.engine, r.logger())
	for _, dir := range boxname.StaleDirs(StateDir) {
		if err := boxname.RemoveDir(dir); err != nil {
			r.logger().Warn("removing a dead Warden's box directory", "dir", dir, "err", err)
		}
	}
}

// removeStaleContainers removes every container staleContainers finds,
// going on past a failed removal, and logs each failure on its own
// record, a removal's with the container as "box".
func removeStaleContainers(ctx context.Context, e engineAPI, log *slog.Logger) {
	ids, err := staleContainers(ctx, e)
	if err != nil {
		log.Warn("listing dead Wardens' containers", "label", Label, "err", err)
		return
	}
	for _, id := range ids {
		if err := e.Remove(ctx, id); err != nil {
			log.Warn("removing a dead Warden's container", "box", id, "err", err)
		}
	}
}
