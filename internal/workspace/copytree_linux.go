package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// maxCopyDepth bounds how deep CopyTree goes: each level holds two
// descriptors, and a box may nest directories as deep as its inodes let it.
const maxCopyDepth = 256

// CopyTree copies the tree below src into dst, an existing directory, as
// root, for a tree a sandbox wrote (a box's scratch, saved or given back):
// every directory is opened beneath its parent with openat2 and the
// flags the workspace uses (no symbolic link, no step out, no mount
// crossing), so a directory swapped for a link mid-copy fails the copy
// instead of leading it to a host file. It copies directories, regular
// files (as many bytes as fstat said, holes kept) and symbolic links (as
// links, never followed); devices, FIFOs and sockets are skipped and
// counted. It keeps owners, mode bits 0777 and sticky (set-id bits are
// cleared), and modification times (to the microsecond); no extended
// attributes. A directory already in dst is merged into; any other name
// already there fails. The error is one line: the first failure and how
// many more there were; it wraps the failure's errno (unix.ENOSPC for a
// full dst). The copy stops with ErrTooLarge past maxBytes of file data:
// a hard link is copied as a file of its own, so a tree that fits its
// tmpfs may copy to far more.
func CopyTree(ctx context.Context, src, dst string, maxBytes int64) (TreeCopy, error) {
	c := &copier{ctx: ctx, limit: maxBytes}
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.done, fmt.Errorf("opening %s to copy: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return c.done, fmt.Errorf("opening %s to copy into: %w", dst, err)
	}
	defer unix.Close(dfd)
	c.dir(sfd, dfd, ".", 0)
	if c.first != nil {
		if c.more > 0 {
			return c.done, fmt.Errorf("copying %s: %w (and %d more failures)", src, c.first, c.more)
		}
		return c.done, fmt.Errorf("copying %s: %w", src, c.first)
	}
	return c.done, nil
}

// copier is one CopyTree: what it copied and its first failure.
type copier struct {
	ctx   context.Context
	limit int64
	done  TreeCopy
	first error
	more  int
}

// fail notes the failure of rel.
func (c *copier) fail(op, rel string, err error) {
	if c.first == nil {
		c.first = fmt.Errorf("%s %q: %w", op, rel, err)
		return
	}
	c.more++
}

// stop says the copy should go no further: cancelled, or dst is full.
func (c *copier) stop() bool {
	if c.first == nil && c.ctx.Err() != nil {
		c.first = c.ctx.Err()
	}
	return c.first != nil && (c.ctx.Err() != nil || errors.Is(c.first, unix.ENOSPC) || errors.Is(c.first, unix.EDQUOT) || errors.Is(c.first, ErrTooLarge))
}

// dir copies the entries of the open directory sfd into dfd, then sets
// dfd's attributes to sfd's (last, since its entries change its time).
func (c *copier) dir(sfd, dfd int, rel string, depth int) {
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		c.fail("reading", rel, err)
		return
	}
	if depth > maxCopyDepth {
		c.fail("copying", rel, fmt.Errorf("directories nest deeper than %d levels", maxCopyDepth))
		return
	}
	names, err := readNames(sfd)
	if err != nil {
		c.fail("listing", rel, err)
		return
	}
	for _, name := range names {
		if c.stop() {
			return
		}
		c.entry(sfd, dfd, name, path.Join(rel, name), depth)
	}
	if err := setAttrs(dfd, &st); err != nil {
		c.fail("setting the attributes of", rel, err)
	}
}

// readNames lists the directory fd without moving fd's own offset for
// later reads (a duplicate is read).
func readNames(fd int) ([]string, error) {
	dup, err := openBeneath(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// entry copies the entry name of sfd into dfd, by its type as lstat finds
// it, checked again on the descriptor opened.
func (c *copier) entry(sfd, dfd int, name, rel string, depth int) {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		c.fail("reading", rel, err)
		return
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = c.subdir(sfd, dfd, name, rel, depth)
	case unix.S_IFREG:
		err = c.file(sfd, dfd, name)
	case unix.S_IFLNK:
		err = copyLink(sfd, dfd, name)
	default:
		c.done.Skipped++
		return
	}
	if err != nil {
		c.fail("copying", rel, err)
	}
}

// subdir makes (or opens, where it is there already) the directory name
// in dfd and copies sfd's name into it.
func (c *copier) subdir(sfd, dfd int, name, rel string, depth int) error {
	s, err := openBeneath(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil && err != unix.EEXIST {
		return err
	}
	d, err := openBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	c.dir(s, d, rel, depth+1)
	return nil
}

// file copies the regular file name of sfd into a new file of dfd: the
// bytes fstat counts on the descriptor opened, holes kept.
func (c *copier) file(sfd, dfd int, name string) error {
	// O_NONBLOCK: should name have become a FIFO, the open does not wait.
	s, err := openBeneath(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(s), name)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(s, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("it changed from a regular file during the copy")
	}
	d, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(d), name)
	defer dst.Close()
	if err := c.copyData(dst, src, st.Size); err != nil {
		return err
	}
	return setAttrs(d, &st)
}

// copyData copies the first size bytes of src into dst, writing only its
// data extents (SEEK_DATA), so holes stay holes, counted in c.done.Bytes
// against c.limit.
func (c *copier) copyData(dst, src *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(src.Fd()), off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(src.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		hole = min(hole, size)
		if data >= hole {
			break
		}
		if c.done.Bytes+hole-data > c.limit {
			return errorf(ErrTooLarge, "the files hold more than %d bytes of data (hard links are copied apart)", c.limit)
		}
		c.done.Bytes += hole - data
		if _, err := dst.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(dst, io.NewSectionReader(src, data, hole-data), hole-data); err != nil {
			return err
		}
		off = hole
	}
	return dst.Truncate(size)
}

// copyLink copies the symbolic link name of sfd into dfd, as a link.
func copyLink(sfd, dfd int, name string) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(sfd, name, buf)
	if err != nil {
		return err
	}
	if n == len(buf) {
		return errors.New("its target is longer than PATH_MAX")
	}
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
		return err
	}
	if err := unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// setAttrs gives the open fd the owner, permission and sticky bits (never
// set-id), and times of st.
func setAttrs(fd int, st *unix.Stat_t) error {
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&(0o777|unix.S_ISVTX)); err != nil {
		return err
	}
	tv := []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(st.Atim)), unix.NsecToTimeval(unix.TimespecToNsec(st.Mtim))}
	return unix.Futimes(fd, tv)
}
