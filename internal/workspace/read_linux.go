package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Stat describes p as lstat(2) would: a final symbolic link is reported as
// itself; a symbolic link before it is refused with ErrLink.
func (d *Dir) Stat(p string) (Entry, error) {
	wp, err := parsePath(p)
	if err != nil {
		return Entry{}, err
	}
	var ent Entry
	err = d.do(func(root int) error {
		// With O_PATH|O_NOFOLLOW, openat2 opens a final symbolic link
		// itself instead of refusing it.
		fd, err := openBeneath(root, wp.String(), unix.O_PATH|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fsError("stat", wp, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fsError("stat", wp, err)
		}
		ent = newEntry(wp, &st, fd, "")
		return nil
	})
	return ent, err
}

// List returns the entries of directory p, sorted by name, as lstat(2)
// sees them. A directory of more than Limits.MaxEntries entries yields
// that many (which ones is up to the file system) and an error wrapping
// ErrTruncated.
func (d *Dir) List(p string) ([]Entry, error) {
	wp, err := parsePath(p)
	if err != nil {
		return nil, err
	}
	var out []Entry
	truncated := false
	err = d.do(func(root int) error {
		fd, err := openBeneath(root, wp.String(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fsError("listing", wp, err)
		}
		f := os.NewFile(uintptr(fd), wp.String())
		defer f.Close()
		// Readdirnames only reads the directory through its descriptor,
		// unlike ReadDir, which may lstat entries by path.
		names, err := f.Readdirnames(d.lim.MaxEntries + 1)
		if err != nil && !errors.Is(err, io.EOF) {
			return fsError("listing", wp, err)
		}
		if len(names) > d.lim.MaxEntries {
			names, truncated = names[:d.lim.MaxEntries], true
		}
		for _, name := range names {
			var st unix.Stat_t
			err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if errors.Is(err, unix.ENOENT) {
				continue // removed since it was listed
			}
			if err != nil {
				return fsError("stat", wp.child(name), err)
			}
			out = append(out, newEntry(wp.child(name), &st, fd, name))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	if truncated {
		return out, errorf(ErrTruncated, "listing %q: stopped at %d entries (the limit); list a subdirectory instead", wp, d.lim.MaxEntries)
	}
	return out, nil
}

// Read opens regular file p for reading. It refuses symbolic links
// (ErrLink), everything but regular files (ErrNotRegular, without opening
// them, so a FIFO cannot block the host nor a device react), files with
// several names (ErrHardLink) and files over Limits.MaxFileBytes
// (ErrTooLarge). The reader reads the file that was checked, through its
// own descriptor, and stops at the size Entry reports.
func (d *Dir) Read(p string) (io.ReadCloser, Entry, error) {
	wp, err := parsePath(p)
	if err != nil {
		return nil, Entry{}, err
	}
	var (
		f   *os.File
		ent Entry
	)
	err = d.do(func(root int) error {
		// The O_PATH descriptor pins the inode without opening it: no
		// FIFO open, no device open, no permission check yet.
		pfd, err := openBeneath(root, wp.String(), unix.O_PATH|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fsError("reading", wp, err)
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fsError("reading", wp, err)
		}
		if err := readable(wp, &st, d.lim.MaxFileBytes); err != nil {
			return err
		}
		fd, err := reopen(wp, pfd)
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), wp.String())
		ent = newEntry(wp, &st, pfd, "")
		return nil
	})
	if err != nil {
		return nil, Entry{}, err
	}
	return &fileReader{f: f, r: &io.LimitedReader{R: f, N: ent.Size}}, ent, nil
}

// reopen opens the inode pinned by pfd for reading. Going through
// /proc/self/fd checks the sandbox user's read permission and cannot
// reach another file. O_NONBLOCK makes the open fail with EWOULDBLOCK,
// instead of waiting for the lease-break time, when a process in the
// sandbox holds a write lease on the file; the returned descriptor is
// blocking again.
func reopen(wp wsPath, pfd int) (int, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return -1, errorf(ErrBusy, "reading %q: file busy: a process in the sandbox holds a lease on it; release the lease (F_SETLEASE F_UNLCK) in the sandbox and retry", wp)
	}
	if err != nil {
		return -1, fsError("reading", wp, err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return -1, fsError("reading", wp, err)
	}
	return fd, nil
}

// readable refuses what Read does not read.
func readable(p wsPath, st *unix.Stat_t, limit int64) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return linkError(p)
	case unix.S_IFDIR:
		return &pathError{msg: fmt.Sprintf("reading %q: it is a directory; list it instead", p), kinds: []error{ErrIsDir, ErrNotRegular}}
	default:
		return errorf(ErrNotRegular, "reading %q: it is a %s, not a regular file; Warden reads regular files only", p, typeName(st.Mode))
	}
	if st.Nlink > 1 {
		return errorf(ErrHardLink, "%q is a hard link; Warden does not read files with several names", p)
	}
	if st.Size > limit {
		return errorf(ErrTooLarge, "reading %q: it is %d bytes, over the %d-byte limit", p, st.Size, limit)
	}
	return nil
}

// fileReader reads at most the size seen at open from its own descriptor;
// CopyN reads f directly, within r's bound.
type fileReader struct {
	f *os.File
	r *io.LimitedReader
}

func (r *fileReader) Read(b []byte) (int, error) { return r.r.Read(b) }
func (r *fileReader) Close() error               { return r.f.Close() }

// newEntry describes p from st; for a symbolic link it also reads the
// link's text, relative to dirfd by name (or of dirfd itself when name is
// "", an O_PATH descriptor of the link).
func newEntry(p wsPath, st *unix.Stat_t, dirfd int, name string) Entry {
	e := Entry{
		Name:    ".",
		Path:    p.String(),
		Type:    entryType(st.Mode),
		Size:    st.Size,
		Mode:    os.FileMode(st.Mode & 0o777),
		ModTime: modTime(st.Mtim),
		UID:     st.Uid,
		GID:     st.Gid,
	}
	if !p.isRoot() {
		e.Name = p.base()
	}
	if e.Type == TypeSymlink {
		buf := make([]byte, maxPathBytes)
		// A link whose text cannot be read is still listed, without it.
		if n, err := unix.Readlinkat(dirfd, name, buf); err == nil {
			e.LinkTarget = string(buf[:n])
		}
	}
	return e
}

// modTime is ts as an Entry reports it (clampTime).
func modTime(ts unix.Timespec) time.Time {
	sec, nsec := ts.Unix()
	return clampTime(sec, nsec)
}

func entryType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return TypeFile
	case unix.S_IFDIR:
		return TypeDir
	case unix.S_IFLNK:
		return TypeSymlink
	}
	return TypeOther
}

// typeName names a file type for messages.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}
