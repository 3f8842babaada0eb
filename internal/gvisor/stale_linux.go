package gvisor

import (
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
			_ = b.runscCmd("delete", "--force", id)
		}
		_ = boxname.RemoveDir(dir)
	}
}
