package scratch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// inRoot is where scratch directory name is in a sandbox's root, without
// the leading slash ("home/sandbox").
func inRoot(name string) string {
	return strings.TrimPrefix(path.Clean(rootfs.ScratchDirs[name]), "/")
}

// openKept opens each of Kept under dir as its own os.Root without
// following a link on the way (openPlace); a missing one is skipped.
func openKept(dir *os.Root, names []string, where func(string) string) (map[string]*os.Root, func(), error) {
	roots := map[string]*os.Root{}
	closeAll := func() {
		for _, r := range roots {
			r.Close() // read-only handles: nothing to lose on close
		}
	}
	for _, name := range names {
		r, err := openPlace(dir, where(name))
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

// openPlace opens the directory p (slash-separated, relative) under dir
// as an os.Root, one component at a time, each of which must be a real
// directory: os.Root follows a link that stays inside the tree, which
// would let a template's home/sandbox -> ../etc seed its /etc.
func openPlace(dir *os.Root, p string) (*os.Root, error) {
	cur := dir
	for _, name := range strings.Split(p, "/") {
		next, err := openRealDir(cur, name)
		if cur != dir {
			cur.Close() // read-only: nothing to lose on close
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// openRealDir opens name in dir if it is a directory and not a link,
// checking after the open that it is the very directory Lstat saw, so a
// link swapped in meanwhile (a live scratch) is refused too.
func openRealDir(dir *os.Root, name string) (*os.Root, error) {
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, ErrLinkedPlace
	}
	r, err := dir.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	got, err := r.Stat(".")
	if err != nil || !os.SameFile(fi, got) {
		r.Close() // read-only: nothing to lose on close
		return nil, errors.Join(ErrLinkedPlace, err)
	}
	return r, nil
}
