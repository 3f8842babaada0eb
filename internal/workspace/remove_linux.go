package workspace

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Bounds of a recursive removal, so that a hostile tree (deep, or refilled
// as fast as it is emptied) costs the host a bounded amount of work.
const (
	maxRemoveDepth   = 256
	maxRemoveEntries = 1 << 20
	removeBatch      = 1024
)

// Remove deletes p. A symbolic link is removed itself. A directory must be
// empty unless recursive (else ErrNotEmpty); a recursive removal walks the
// tree through directory descriptors and unlinkat, never by path, so a
// link inside it is removed, never followed, and a rename cannot redirect
// it. A tree deeper than 256 levels or of more than 2^20 entries is
// ErrTooLarge (what was removed so far stays removed). The workspace
// itself cannot be removed (ErrBadPath).
func (d *Dir) Remove(p string, recursive bool) error {
	wp, err := d.changing("removing", p)
	if err != nil {
		return err
	}
	if wp.isRoot() {
		return badPath(`refusing to remove the workspace itself ("."); remove the entries inside it instead`)
	}
	return d.do(func(root int) error {
		dirfd, err := openBeneath(root, wp.dir().String(), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fsError("removing", wp, err)
		}
		defer unix.Close(dirfd)
		if !recursive {
			return removeOne(dirfd, wp)
		}
		budget := maxRemoveEntries
		return removeAll(dirfd, wp, 0, &budget)
	})
}

// removeOne removes p from its directory dirfd: a non-directory, or an
// empty directory.
func removeOne(dirfd int, p wsPath) error {
	err := unix.Unlinkat(dirfd, p.base(), 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dirfd, p.base(), unix.AT_REMOVEDIR)
		if errors.Is(err, unix.EEXIST) {
			err = unix.ENOTEMPTY
		}
	}
	if err != nil {
		return fsError("removing", p, err)
	}
	return nil
}

// removeAll removes p from its directory dirfd with everything below it.
// budget counts the entries it may still visit.
func removeAll(dirfd int, p wsPath, depth int, budget *int) error {
	err := unix.Unlinkat(dirfd, p.base(), 0)
	if err == nil || (errors.Is(err, unix.ENOENT) && depth > 0) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fsError("removing", p, err)
	}
	if depth >= maxRemoveDepth {
		return errorf(ErrTooLarge, "removing %q: the tree is deeper than %d levels; remove its deepest parts first", p, maxRemoveDepth)
	}
	fd, err := openBeneath(dirfd, p.base(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fsError("removing", p, err)
	}
	if err := removeEntries(os.NewFile(uintptr(fd), p.String()), p, depth, budget); err != nil {
		return err
	}
	return removeOne(dirfd, p)
}

// removeEntries removes everything in directory dir (which it closes), in
// batches, so that a huge directory never sits in memory at once.
func removeEntries(dir *os.File, p wsPath, depth int, budget *int) error {
	defer dir.Close()
	fd := int(dir.Fd())
	for {
		names, err := dir.Readdirnames(removeBatch)
		for _, name := range names {
			if *budget == 0 {
				return errorf(ErrTooLarge, "removing %q: it holds more than %d entries; remove it in parts", p, maxRemoveEntries)
			}
			*budget--
			if err := removeAll(fd, p.child(name), depth+1, budget); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fsError("removing", p, err)
		}
	}
}
