package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// removeStale removes the containers and directories of Wardens that
// died: their label, and the names of their directories, carry their pid.
func (r *Runtime) removeStale(ctx context.Context) {
	if cs, err := r.engine.List(ctx, Label); err == nil {
		for _, c := range cs {
			if pid, err := strconv.Atoi(c.Labels[Label]); err == nil && pid != os.Getpid() && !cgroup.ProcessAlive(pid) {
				_ = r.engine.Remove(ctx, c.ID)
			}
		}
	}
	ents, err := os.ReadDir(StateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest := strings.TrimPrefix(strings.TrimPrefix(e.Name(), "template-"), "box-warden-")
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || cgroup.ProcessAlive(pid) {
			continue
		}
		dir := filepath.Join(StateDir, e.Name())
		_ = rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
		_ = os.RemoveAll(dir)
	}
}
