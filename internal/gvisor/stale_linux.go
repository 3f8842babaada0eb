package gvisor

import (
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

// RemoveStaleDir removes one entry Stale listed: its scratch mount, if
// any, then the directory.
func RemoveStaleDir(dir string) error {
	_ = rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
	return os.RemoveAll(dir)
}

// removeStale removes what dead Wardens left in StateDir, their runsc
// containers first.
func (r *Runtime) removeStale(runsc string) {
	for _, dir := range Stale(StateDir) {
		if id, ok := strings.CutPrefix(filepath.Base(dir), "box-"); ok {
			b := &box{r: r, runsc: runsc, id: id}
			_ = b.runscCmd("delete", "--force", id)
		}
		_ = RemoveStaleDir(dir)
	}
}
