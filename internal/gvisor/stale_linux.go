package gvisor

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// Stale lists what Wardens that died left in dir (StateDir, or the docker
// backend's): boxes and half-written templates whose names carry the pid
// of a Warden that is gone (cgroup.NewName), never a live Warden's, and
// the per-process templates of older Wardens (template-<pid>).
func Stale(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		rest, ok := "", false
		for _, prefix := range []string{"tmp-", "template-", "box-" + LabelPrefix} {
			if rest, ok = strings.CutPrefix(e.Name(), prefix); ok {
				break
			}
		}
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || cgroup.ProcessAlive(pid) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// RemoveStaleDir removes one entry Stale listed, or a box's own directory
// at its end: its scratch mount, if any, then the directory.
func RemoveStaleDir(dir string) error {
	err := rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // a template, or a box that ended before making one
	}
	return errors.Join(err, os.RemoveAll(dir))
}

// removeStale removes what dead Wardens left in StateDir, their runsc
// containers first.
func (r *Runtime) removeStale(runsc string) {
	for _, dir := range Stale(StateDir) {
		if id, ok := strings.CutPrefix(filepath.Base(dir), "box-"); ok {
			b := &box{r: r, runsc: runsc, id: id}
			if err := b.runscCmd("delete", "--force", id); err != nil {
				b.logger().Warn("deleting a dead Warden's runsc container", "err", err)
			}
		}
		if err := RemoveStaleDir(dir); err != nil {
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
