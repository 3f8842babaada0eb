package boxname

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"golang.org/x/sys/unix"
)

// pidDirPrefixes start the entries of a backend's state directory that are
// named after their Warden's pid: half-written templates and roots being
// written or removed ("tmp-<pid>", "tmp-<pid>-img-…", "tmp-<pid>-gc-…")
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
// written, "tmp-<pid>-img-…", or removed, "tmp-<pid>-gc-img-…"), so a crash
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
// lists it then), and the error says so and how to unmount it. A failed
// unmount of the scratch is returned too, after the other error or alone
// when the directory is gone, so that the caller logs it; only a scratch
// that is missing or was no mount (ENOENT, ENOTEMPTY) goes unsaid.
func RemoveDir(dir string) error {
	uerr := rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
	if errors.Is(uerr, fs.ErrNotExist) || errors.Is(uerr, unix.ENOTEMPTY) {
		uerr = nil
	}
	mounted, err := mountsAt(dir)
	if err != nil {
		return withUnmount(fmt.Errorf("leaving %s in place: %w", dir, err), uerr)
	}
	if len(mounted) > 0 {
		p := mountinfoUnescaper.Replace(mounted[0])
		return withUnmount(fmt.Errorf("leaving %s in place: %q is still mounted, and removing the directory "+
			"would delete through the mount; unmount it (umount -l %q) and the next Warden's stale sweep "+
			"removes the directory", dir, p, p), uerr)
	}
	if err := os.RemoveAll(dir); err != nil {
		return withUnmount(fmt.Errorf("removing %s: %w", dir, err), uerr)
	}
	return uerr
}

// withUnmount adds the scratch's unmount error uerr, if any, to err on
// the same line, both kept for errors.Is.
func withUnmount(err, uerr error) error {
	if uerr == nil {
		return err
	}
	return fmt.Errorf("%w (and %w)", err, uerr)
}

// threadMountinfo is the mount table of the calling thread's mount
// namespace, the one RemoveAll would walk.
const threadMountinfo = "/proc/thread-self/mountinfo"

// mountsAt lists the mount points at or below dir in threadMountinfo,
// as it writes them (octal escapes for space, tab, newline and
// backslash). Links in dir's parent are resolved, as mountinfo names
// each mount by its real path; a dir that is not there holds none.
func mountsAt(dir string) ([]string, error) {
	// Abs cleans first: the Dir and Base of "box-x/" would be "box-x" and
	// "box-x", naming a path below the directory that holds no mount.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", dir, err)
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", dir, err)
	}
	abs = filepath.Join(parent, filepath.Base(abs))
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

// mountinfoEscapes are the characters the kernel escapes in mountinfo's
// paths, each followed by its escape.
var mountinfoEscapes = []string{" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`}

// mountinfoEscaper writes a path as the kernel writes mount points in
// mountinfo.
var mountinfoEscaper = strings.NewReplacer(mountinfoEscapes...)

// mountinfoUnescaper reads a mount point as mountinfo writes it back into
// the path, for messages that tell an operator what to unmount.
var mountinfoUnescaper = strings.NewReplacer(swapPairs(mountinfoEscapes)...)

// swapPairs turns old, new pairs for strings.NewReplacer into new, old.
func swapPairs(pairs []string) []string {
	out := make([]string, 0, len(pairs))
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, pairs[i+1], pairs[i])
	}
	return out
}
