package boxname

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// staleDirPrefixes start the entries of a backend's state directory that
// carry their Warden's pid: boxes ("box-" and a name from Box), half-written
// templates ("tmp-<pid>") and older Wardens' per-process templates
// ("template-<pid>").
var staleDirPrefixes = []string{"tmp-", "template-", "box-" + Prefix}

// StaleDirs lists what Wardens that died left in a backend's state
// directory dir: entries whose names carry the pid of a Warden that is
// gone, never a live Warden's.
func StaleDirs(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		rest, ok := "", false
		for _, prefix := range staleDirPrefixes {
			if rest, ok = strings.CutPrefix(e.Name(), prefix); ok {
				break
			}
		}
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || !Dead(pid) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// RemoveDir removes one entry StaleDirs listed: its scratch mount, if
// any, then the directory.
func RemoveDir(dir string) error {
	err := rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // a template, or a box that ended before making one
	}
	return errors.Join(err, os.RemoveAll(dir))
}
