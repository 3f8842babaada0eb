package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// StaleContainers lists the containers of Wardens that died (stale), and
// those whose Warden this one cannot judge (foreign: another pid
// namespace, or a label it cannot read), by the owner in their label.
func StaleContainers(ctx context.Context, e *Engine) (stale, foreign []string, err error) {
	return staleContainers(ctx, e)
}

// staleContainers is StaleContainers against any engine: of the
// containers carrying Label, those whose owner boxname.Judge finds dead,
// and those it cannot judge.
func staleContainers(ctx context.Context, e engineAPI) (stale, foreign []string, err error) {
	cs, err := e.List(ctx, Label)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs {
		switch judgeLabel(c.Labels[Label]) {
		case boxname.OwnerDead:
			stale = append(stale, c.ID)
		case boxname.OwnerForeign:
			foreign = append(foreign, c.ID)
		}
	}
	return stale, foreign, nil
}

// judgeLabel judges the owner a label names; an unreadable label (an
// older Warden's bare pid, another program's value) is not judged.
func judgeLabel(v string) boxname.Verdict {
	o, ok := boxname.ParseOwner(v)
	if !ok {
		return boxname.OwnerForeign
	}
	return boxname.Judge(o)
}

// removeStale removes the containers and directories of Wardens that
// died.
func (r *Runtime) removeStale(ctx context.Context) {
	// The next start retries what fails; doctor --leaks lists what stays.
	if err := removeStaleContainers(ctx, r.engine); err != nil {
		r.logger().Warn("removing dead Wardens' containers", "err", err)
	}
	for _, dir := range boxname.StaleDirs(StateDir) {
		if err := boxname.RemoveDir(dir); err != nil {
			r.logger().Warn("removing a dead Warden's box directory", "dir", dir, "err", err)
		}
	}
}

// removeStaleContainers removes every container staleContainers finds,
// going on past a failed removal, and returns every error met.
func removeStaleContainers(ctx context.Context, e engineAPI) error {
	ids, _, err := staleContainers(ctx, e)
	if err != nil {
		return fmt.Errorf("listing containers labelled %s: %w", Label, err)
	}
	var errs []error
	for _, id := range ids {
		if err := e.Remove(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
