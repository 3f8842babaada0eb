package gvisor

import (
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// removeStale removes what dead Wardens left in StateDir, their runsc
// containers first.
func (r *Runtime) removeStale(runsc string) {
	for _, dir := range boxname.StaleDirs(StateDir) {
		if id, ok := strings.CutPrefix(filepath.Base(dir), "box-"); ok {
			b := &box{r: r, runsc: runsc, id: id}
			if err := b.runscCmd("delete", "--force", id); err != nil {
				b.logger().Warn("deleting a dead Warden's runsc container", "err", err)
			}
		}
		if err := boxname.RemoveDir(dir); err != nil {
			// The next start retries; doctor --leaks lists what stays.
			r.logger().Warn("removing a dead Warden's box directory", "dir", dir, "err", err)
		}
	}
}

// logger is the Runtime's logger (Logger, else slog.Default()).
func (r *Runtime) logger() *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("backend", "gvisor")
}
