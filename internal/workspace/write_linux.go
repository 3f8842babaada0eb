package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Write stores what r yields as file p, creating p's directories as
// needed. The content goes to a fresh temporary name in p's directory
// first and is renamed over p only when complete, so a reader never sees
// half a file and an upload over Limits.MaxFileBytes (ErrTooLarge) leaves
// nothing behind. The rename replaces a file, or a symbolic link itself,
// never what a link points to; it refuses a directory (ErrIsDir). mode
// holds permission bits only; zero means 0644. The file belongs to the
// sandbox user.
func (d *Dir) Write(p string, r io.Reader, mode fs.FileMode) (Entry, error) {
	wp, err := d.changing("writing", p)
	if err != nil {
		return Entry{}, err
	}
	if wp.isRoot() {
		return Entry{}, errorf(ErrIsDir, "writing %q: it is the workspace directory; give a file name", wp)
	}
	if mode == 0 {
		mode = 0o644
	}
	if mode&^fs.ModePerm != 0 {
		return Entry{}, errorf(ErrBadMode, "writing %q: mode %v has more than permission bits; give bits of 0777 only", wp, mode)
	}
	dirfd, tmp, f, err := d.createTemp(wp)
	if err != nil {
		return Entry{}, err
	}
	defer unix.Close(dirfd)
	defer f.Close()
	fd := int(f.Fd())
	limit := d.lim.MaxFileBytes
	n, err := CopyN(f, r, limit+1)
	if errors.Is(err, io.EOF) {
		err = nil // the whole content, within the limit
	}
	if err == nil && n > limit {
		err = errorf(ErrTooLarge, "writing %q: the content is over the %d-byte limit; nothing was written", wp, limit)
	} else if err != nil {
		err = fsError("writing", wp, err)
	}
	if err == nil {
		err = d.do(func(int) error {
			if err := unix.Fchmod(fd, uint32(mode)); err != nil {
				return fsError("writing", wp, err)
			}
			if err := unix.Renameat(dirfd, tmp, dirfd, wp.base()); err != nil {
				return fsError("writing", wp, err)
			}
			return nil
		})
	}
	if err != nil {
		// Best effort: the error that matters is the one above, and a
		// leftover temporary name is the sandbox user's own file.
		_ = d.do(func(int) error { return unix.Unlinkat(dirfd, tmp, 0) })
		return Entry{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Entry{}, fsError("writing", wp, err)
	}
	return newEntry(wp, &st, -1, ""), nil
}

// createTemp opens wp's directory, creating it as needed, and creates a
// new, private file of a random name there, unless wp is a directory.
func (d *Dir) createTemp(wp wsPath) (dirfd int, tmp string, f *os.File, err error) {
	err = d.do(func(root int) error {
		var err error
		if dirfd, err = mkdirAll(root, wp, len(wp.elems)-1, "writing"); err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, wp.base(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			unix.Close(dirfd)
			return errorf(ErrIsDir, "writing %q: it is a directory; remove it first or choose another name", wp)
		}
		fd := -1
		err = unix.EEXIST
		for try := 0; errors.Is(err, unix.EEXIST) && try < 8; try++ {
			var b [8]byte
			rand.Read(b[:])
			tmp = TempPrefix + hex.EncodeToString(b[:])
			fd, err = openBeneath(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		}
		if err != nil {
			unix.Close(dirfd)
			return fsError("writing", wp, err)
		}
		f = os.NewFile(uintptr(fd), tmp)
		return nil
	})
	return dirfd, tmp, f, err
}

// Mkdir creates directory p and its missing parents, like mkdir -p: an
// existing directory is fine; an existing non-directory is ErrExists (and
// ErrNotDir), on the way ErrNotDir. New directories are 0755 less the
// process's umask, and belong to the sandbox user.
func (d *Dir) Mkdir(p string) (Entry, error) {
	return d.mkdir(p, 0)
}

// MkdirMode is Mkdir that then gives directory p the permission bits
// mode (none of setuid, setgid or sticky: ErrBadMode), whether it made p
// or found it, as the sandbox user: a snapshot's restore keeps each
// directory's bits this way. p must be readable by its owner.
func (d *Dir) MkdirMode(p string, mode fs.FileMode) (Entry, error) {
	if mode&^fs.ModePerm != 0 || mode == 0 {
		return Entry{}, errorf(ErrBadMode, "making directory %q: mode %v is not permission bits; give bits of 0777 only", p, mode)
	}
	return d.mkdir(p, mode)
}

// mkdir is Mkdir, and then a chmod of p to mode unless mode is 0.
func (d *Dir) mkdir(p string, mode fs.FileMode) (Entry, error) {
	wp, err := d.changing("making directory", p)
	if err != nil {
		return Entry{}, err
	}
	var ent Entry
	err = d.do(func(root int) error {
		fd, err := mkdirAll(root, wp, len(wp.elems), "creating directory")
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if mode != 0 {
			if err := chmodDir(fd, mode); err != nil {
				return fsError("setting the mode of directory", wp, err)
			}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fsError("creating directory", wp, err)
		}
		ent = newEntry(wp, &st, -1, "")
		return nil
	})
	return ent, err
}

// chmodDir sets the permission bits of the directory pathFD (an O_PATH
// descriptor, which fchmod refuses) through a descriptor of the same
// directory opened from it: nothing is looked up by name.
func chmodDir(pathFD int, mode fs.FileMode) error {
	fd, err := unix.Openat(pathFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, uint32(mode.Perm()))
}

// mkdirAll opens the directory made of p's first levels elements as
// O_PATH, creating missing ones. Each level is opened (or made with
// mkdirat) below the previous level's descriptor, so a symbolic link
// planted at any level is refused and a rename cannot move the walk
// elsewhere. Errors name op and p; a non-directory at p itself (levels
// covering all of p) is ErrExists too.
func mkdirAll(root int, p wsPath, levels int, op string) (int, error) {
	cur, err := openBeneath(root, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, fsError(op, p, err)
	}
	for i, name := range p.elems[:levels] {
		next, err := openOrMkdir(cur, name)
		unix.Close(cur)
		if err == nil {
			cur = next
			continue
		}
		at := wsPath{elems: p.elems[:i+1]}
		switch {
		case errors.Is(err, unix.ELOOP):
			return -1, errorf(ErrLink, "path %q goes through a symbolic link (%q), which Warden never follows from the host", p, at)
		case errors.Is(err, unix.ENOTDIR):
			kinds := []error{ErrNotDir}
			if i == len(p.elems)-1 {
				kinds = append(kinds, ErrExists)
			}
			return -1, &pathError{msg: fmt.Sprintf("%s %q: %q exists and is not a directory", op, p, at), kinds: kinds}
		}
		return -1, fsError(op, p, err)
	}
	return cur, nil
}

// openOrMkdir opens directory name in dirfd, creating it if missing.
func openOrMkdir(dirfd int, name string) (int, error) {
	fd, err := openBeneath(dirfd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
	if !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	if err := unix.Mkdirat(dirfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return openBeneath(dirfd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
}
