package docker

import (
	"context"
	"log/slog"

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
	ids, _, err := staleContainers(ctx, e)
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
