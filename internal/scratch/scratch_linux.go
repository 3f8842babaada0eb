package scratch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// Kept are the scratch directories (rootfs.ScratchDirs' keys) a commit
// keeps and a session on the template starts with: the sandbox user's
// home and /workspace. /tmp and /dev/shm are scratch by name: never kept.
var Kept = []string{"home", "workspace"}

// inRoot is where scratch directory name is in a sandbox's root, without
// the leading slash ("home/sandbox").
func inRoot(name string) string {
	return strings.TrimPrefix(path.Clean(rootfs.ScratchDirs[name]), "/")
}

// openKept opens each of Kept under dir as its own os.Root; a missing
// one is skipped.
func openKept(dir *os.Root, names []string, where func(string) string) (map[string]*os.Root, func(), error) {
	roots := map[string]*os.Root{}
	closeAll := func() {
		for _, r := range roots {
			r.Close() // read-only handles: nothing to lose on close
		}
	}
	for _, name := range names {
		r, err := dir.OpenRoot(where(name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("opening %s: %w", where(name), err)
		}
		roots[name] = r
	}
	return roots, closeAll, nil
}
