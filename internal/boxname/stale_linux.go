package boxname

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// pidDirPrefixes start the entries of a backend's state directory that are
// named after their Warden's pid: half-written templates and roots being
// written or removed ("tmp-<pid>", "tmp-<pid>-img", "tmp-<pid>-gc-…")
// and older Wardens' per-process templates ("template-<pid>").
var pidDirPrefixes = []string{"tmp-", "template-"}

// boxDirPrefix starts a box's state directory: "box-" and a name from Box.
const boxDirPrefix = "box-" + Prefix

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
		if pid, ok := dirOwner(e.Name()); ok && Dead(pid) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// dirOwner reads the pid a state directory entry carries: "box-" and a
// name from Box (OwnerPID), or "tmp-<pid>" and "template-<pid>", each
// perhaps followed by "-" and what the entry is (a shared root being
// written, "tmp-<pid>-img", or removed, "tmp-<pid>-gc-img-…"), so a crash
// mid-write or mid-removal leaves nothing the sweep misses.
func dirOwner(name string) (int, bool) {
	if rest, ok := strings.CutPrefix(name, boxDirPrefix); ok {
		return OwnerPID(rest)
	}
	for _, prefix := range pidDirPrefixes {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			pid, _, _ := strings.Cut(rest, "-")
			return parsePID(pid)
		}
	}
	return 0, false
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
