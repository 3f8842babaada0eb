package boxname

import (
	"errors"
	"fmt"
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

// RemoveDir removes a box's state directory dir, at the box's end or as
// an entry StaleDirs listed: its scratch mount, if any, then the
// directory. It removes nothing while anything is still mounted at or
// below dir (the scratch's unmount failed, or something was mounted
// there): RemoveAll would delete through the mount, the box's files or
// whatever the mount shows. Such a directory stays for the stale sweep of
// the next Warden to start once this one is gone (warden doctor --leaks
// lists it then), and the error says so.
func RemoveDir(dir string) error {
	uerr := rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
	mounted, err := mountsAt(dir)
	if err != nil {
		return fmt.Errorf("leaving %s in place: %w", dir, err)
	}
	if len(mounted) > 0 {
		why := fmt.Errorf("leaving %s in place for the stale sweep: %s is still mounted, and removing it would delete through the mount", dir, mounted[0])
		if uerr != nil {
			why = fmt.Errorf("%w (%w)", why, uerr)
		}
		return why
	}
	// Nothing mounted: whatever the unmount said (a scratch that was no
	// mount, holding files), RemoveAll removes all there is.
	return os.RemoveAll(dir)
}

// threadMountinfo is the mount table of the calling thread's mount
// namespace, the one RemoveAll would walk.
const threadMountinfo = "/proc/thread-self/mountinfo"

// mountsAt lists the mount points at or below dir in threadMountinfo,
// as it writes them (octal escapes for space, tab, newline and
// backslash). Links in dir's parent are resolved, as mountinfo names
// each mount by its real path; a dir that is not there holds none.
func mountsAt(dir string) ([]string, error) {
	parent, err := filepath.Abs(filepath.Dir(dir))
	if err == nil {
		parent, err = filepath.EvalSymlinks(parent)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", dir, err)
	}
	abs := filepath.Join(parent, filepath.Base(dir))
	b, err := os.ReadFile(threadMountinfo)
	if err != nil {
		return nil, fmt.Errorf("listing the mounts in %s: %w", abs, err)
	}
	return mountPointsAt(string(b), abs), nil
}

// mountPointsAt lists the mount points at or below the absolute, clean
// path dir in the mountinfo text info (proc(5): the fifth field of each
// line).
func mountPointsAt(info, dir string) []string {
	esc := mountinfoEscaper.Replace(dir)
	var out []string
	for line := range strings.Lines(info) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if p := f[4]; p == esc || strings.HasPrefix(p, esc+"/") || esc == "/" {
			out = append(out, p)
		}
	}
	return out
}

// mountinfoEscaper writes a path as the kernel writes mount points in
// mountinfo.
var mountinfoEscaper = strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`)
