package workspace

import (
	"errors"
	"golang.org/x/sys/unix"
)

// Rename moves src to dst, creating dst's missing directories, as
// rename(2) does: a file or empty directory at dst is replaced, a
// symbolic link at src moves as itself and one at dst is replaced, never
// followed. Both parents are opened link-safely below the workspace, so a
// link planted in either path is refused (ErrLink). A missing src is
// ErrNotFound; moving a directory into itself, or the workspace itself,
// is ErrBadPath. It returns dst's entry.
func (d *Dir) Rename(src, dst string) (Entry, error) {
	from, err := d.changing("moving", src)
	if err != nil {
		return Entry{}, err
	}
	to, err := d.changing("moving", dst)
	if err != nil {
		return Entry{}, err
	}
	if from.isRoot() || to.isRoot() {
		return Entry{}, badPath(`refusing to move the workspace itself ("."); move the entries inside it instead`)
	}
	var ent Entry
	err = d.do(func(root int) error {
		fromDir, err := openBeneath(root, from.dir().String(), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fsError("moving", from, err)
		}
		defer unix.Close(fromDir)
		var st unix.Stat_t
		if err := unix.Fstatat(fromDir, from.base(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fsError("moving", from, err)
		}
		toDir, err := mkdirAll(root, to, len(to.elems)-1, "moving to")
		if err != nil {
			return err
		}
		defer unix.Close(toDir)
		if err := unix.Renameat(fromDir, from.base(), toDir, to.base()); err != nil {
			return renameError(from, to, err)
		}
		if err := unix.Fstatat(toDir, to.base(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fsError("stat", to, err)
		}
		ent = newEntry(to, &st, toDir, to.base())
		return nil
	})
	return ent, err
}

// renameError names what went wrong in moving from to to.
func renameError(from, to wsPath, err error) error {
	switch {
	case errors.Is(err, unix.EINVAL):
		return errorf(ErrBadPath, "moving %q to %q: a directory cannot move into itself; choose a destination outside it", from, to)
	case errors.Is(err, unix.ENOENT):
		return fsError("moving", from, err)
	}
	return fsError("moving to", to, err)
}
