package gvisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// removeStale removes what Wardens that died left in StateDir: their
// containers (runsc delete), scratch mounts and directories. Names carry
// the creating Warden's pid (cgroup.NewName), so a live Warden's boxes
// are never touched.
func (r *Runtime) removeStale(runsc string) {
	ents, err := os.ReadDir(StateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		id, isBox := strings.CutPrefix(name, "box-")
		pidPart := strings.TrimPrefix(strings.TrimPrefix(name, "template-"), "box-"+LabelPrefix)
		pid, err := strconv.Atoi(strings.SplitN(pidPart, "-", 2)[0])
		if err != nil || pid == os.Getpid() || cgroup.ProcessAlive(pid) {
			continue
		}
		dir := filepath.Join(StateDir, name)
		if isBox {
			b := &box{r: r, runsc: runsc, id: id}
			_ = b.runscCmd("delete", "--force", id)
			_ = rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
		}
		_ = os.RemoveAll(dir)
	}
}
