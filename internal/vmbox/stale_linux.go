package vmbox

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// removeStale removes what dead Wardens left in state (StateDir): their
// boxes' roots and scratches (still mounted: nothing unmounts them when
// warden is killed) and their directories. What cannot be removed stays
// for the next start, and doctor --leaks lists it.
func (r *Runtime) removeStale(state string) {
	for _, dir := range boxname.StaleDirs(state) {
		if err := removeBox(dir); err != nil {
			r.logger().Warn("removing a dead Warden's microvm box directory", "dir", dir, "err", err)
		}
	}
}

// removeBox unmounts a box directory's root and scratch and removes it.
// If either unmount fails it leaves the directory alone: removing files
// through a bind of the host's root or into a live scratch must never
// happen.
func removeBox(dir string) error {
	if err := unmountRoot(filepath.Join(dir, "root")); err != nil {
		return err
	}
	if err := rootfs.UnmountScratch(filepath.Join(dir, "scratch")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

// logger is the Runtime's logger (Logger, else slog.Default()).
func (r *Runtime) logger() *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("backend", "microvm")
}
