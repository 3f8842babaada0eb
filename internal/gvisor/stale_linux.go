package gvisor

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/cgroup"
)

// removeStale removes what dead Wardens left in StateDir, their runsc
// containers first: those of their box directories, and those runsc
// still records without one (a restored box's, whose record runsc
// restore leaves behind when its Warden died before deleting it).
// Before those, the stale cgroups are swept (cgroup.RemoveStale): a
// dead Warden's box it had frozen is killed and thawed there, since
// runsc delete waits on a frozen sentry, which never answers
// (killTimeout per box), and only warden serve swept cgroups before:
// warden run and warden mcp reach this alone.
func (r *Runtime) removeStale(runsc string) {
	if err := cgroup.RemoveStale(boxname.Dead); err != nil {
		r.logger().Warn("sweeping dead Wardens' cgroups", "err", err)
	}
	deleted := map[string]bool{}
	del := func(id string) {
		if deleted[id] {
			return
		}
		deleted[id] = true
		b := &box{r: r, runsc: runsc, id: id}
		if err := b.runscCmd("delete", "--force", id); err != nil {
			b.logger().Warn("deleting a dead Warden's runsc container", "err", err)
		}
	}
	for _, dir := range boxname.StaleDirs(StateDir) {
		if id, ok := strings.CutPrefix(filepath.Base(dir), "box-"); ok {
			del(id)
		}
		if err := boxname.RemoveDir(dir); err != nil {
			// The next start retries; doctor --leaks lists what stays.
			r.logger().Warn("removing a dead Warden's box directory", "dir", dir, "err", err)
		}
	}
	for _, id := range staleContainers(runscRoot) {
		del(id)
	}
}

// staleContainers are the ids of the containers runsc records under
// root ("<id>_sandbox:<id>.state") whose Warden is dead.
func staleContainers(root string) []string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".state")
		if !ok {
			continue
		}
		_, id, ok := strings.Cut(name, "_sandbox:")
		if !ok {
			continue
		}
		rest, ok := strings.CutPrefix(id, boxname.Prefix)
		if !ok {
			continue
		}
		if pid, ok := boxname.OwnerPID(rest); ok && boxname.Dead(pid) {
			ids = append(ids, id)
		}
	}
	return ids
}

// logger is the Runtime's logger (Logger, else slog.Default()).
func (r *Runtime) logger() *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("backend", "gvisor")
}
