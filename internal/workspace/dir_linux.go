package workspace

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Dir is an open workspace. Its methods may run concurrently; Close waits
// for them.
type Dir struct {
	mu   sync.RWMutex
	fd   int // the workspace, O_PATH; -1 once closed
	id   identity
	lim  Limits
	name string
}

// Open opens dir, the workspace as the host sees it (for a running sandbox
// /proc/<init-pid>/root/workspace), once, as the caller: root, which can
// follow the magic /proc/<pid>/root link. The final element is not
// followed if it is a symbolic link. Every later operation resolves below
// this descriptor, as host uid and gid (the sandbox user's), and within
// lim. When uid is the process's own (rootless), operations keep the
// process's identity.
func Open(dir string, uid, gid int, lim Limits) (*Dir, error) {
	if uid < 0 || gid < 0 {
		return nil, fmt.Errorf("opening workspace %q: invalid uid %d or gid %d", dir, uid, gid)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	return fromFD(fd, dir, uid, gid, lim)
}

// FromFile is Open for a workspace the caller already holds open (an
// O_PATH or ordinary directory descriptor), named name in messages. The
// Dir keeps its own duplicate; the caller still owns f. A caller that
// opened the directory through /proc/<pid>/root and then checked that pid
// is still its process knows the descriptor is that process's workspace,
// which a path could not promise once the pid might be reused.
func FromFile(f *os.File, name string, uid, gid int, lim Limits) (*Dir, error) {
	if f == nil {
		return nil, fmt.Errorf("opening workspace %q: the box's files are not on this host (a Pod's): its agent serves the file API, but snapshots, forks and watches need them here", name)
	}
	if uid < 0 || gid < 0 {
		return nil, fmt.Errorf("opening workspace %q: invalid uid %d or gid %d", name, uid, gid)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %q: %w", name, err)
	}
	return fromFD(fd, name, uid, gid, lim)
}

// changing parses the path of an operation that changes the workspace,
// refusing it on a read-only one.
func (d *Dir) changing(doing, p string) (wsPath, error) {
	wp, err := parsePath(p)
	if err == nil && d.lim.ReadOnly {
		err = errorf(ErrReadOnly, "%s %q: this workspace is read-only", doing, wp)
	}
	return wp, err
}

// fromFD checks that fd is a directory openBeneath can resolve below,
// and makes the Dir that owns it.
func fromFD(fd int, dir string, uid, gid int, lim Limits) (*Dir, error) {
	probe, err := openBeneath(fd, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	unix.Close(probe)
	return &Dir{
		fd:   fd,
		id:   identity{uid: uid, gid: gid, skip: uid == os.Geteuid()},
		lim:  lim.withDefaults(),
		name: dir,
	}, nil
}

// Owner is the host uid and gid the Dir acts as: the sandbox user's, who
// owns what it creates, so callers can tell the user's files from others'.
func (d *Dir) Owner() (uid, gid int) { return d.id.uid, d.id.gid }

// Close releases the workspace descriptor. Readers returned by Read stay
// valid: they hold their own descriptors.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return fmt.Errorf("closing workspace %q: %w", d.name, err)
	}
	return nil
}

// do runs fn as the sandbox user with the workspace descriptor, and keeps
// Close from closing it meanwhile.
func (d *Dir) do(fn func(root int) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.fd < 0 {
		return fmt.Errorf("workspace %q: %w", d.name, os.ErrClosed)
	}
	return d.id.run(func() error { return fn(d.fd) })
}

// resolveFlags make the kernel refuse, during the open itself, any
// symbolic link (final one included), any magic /proc link, any step out
// of the starting directory and any mount crossing.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens rel below dirfd with openat2 and resolveFlags, or
// where openat2 answers ENOSYS with walkBeneath, which refuses the same.
// It retries EAGAIN, which openat2 returns when a concurrent rename
// might have raced the walk, and EINTR, a few times.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
	for try := 0; ; try++ {
		fd, err := openat2(dirfd, rel, &how)
		if errors.Is(err, unix.ENOSYS) {
			fd, err = walkBeneath(dirfd, rel, flags, mode)
		}
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && try < 16 {
			continue
		}
		return fd, err
	}
}

// fsError turns an errno from operation op on p into a one-line error
// naming p that wraps the matching sentinel.
func fsError(op string, p wsPath, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s %q: %w", op, p, err)
	}
	switch errno {
	case unix.ENOENT:
		return errorf(ErrNotFound, "%s %q: no such file or directory in /workspace", op, p)
	case unix.EEXIST:
		return errorf(ErrExists, "%s %q: it already exists", op, p)
	case unix.EISDIR:
		return errorf(ErrIsDir, "%s %q: it is a directory", op, p)
	case unix.ENOTDIR:
		return errorf(ErrNotDir, "%s %q: it, or one of its parents, is not a directory", op, p)
	case unix.ENOTEMPTY:
		return errorf(ErrNotEmpty, "%s %q: the directory is not empty; remove it recursively", op, p)
	case unix.ENOSPC, unix.EDQUOT:
		return &pathError{msg: fmt.Sprintf("%s %q: the workspace is full (its disk limit); free space or create the session with a larger disk_bytes", op, p), kinds: []error{ErrTooLarge, ErrNoSpace}}
	case unix.ELOOP:
		return linkError(p)
	case unix.EXDEV:
		return errorf(ErrLink, "path %q leaves the workspace or crosses a mount point, which Warden never does from the host", p)
	case unix.EACCES, unix.EPERM:
		return &pathError{msg: fmt.Sprintf("%s %q: %v", op, p, errno), kinds: []error{ErrDenied, errno}}
	case unix.ENAMETOOLONG:
		return errorf(ErrBadPath, "%s %q: the path is too long; use a shorter one", op, p)
	}
	return errorf(errno, "%s %q: %v", op, p, errno)
}

// linkError is the error for a symbolic link met on the way to p.
func linkError(p wsPath) error {
	return errorf(ErrLink, "path %q goes through a symbolic link, which Warden never follows from the host", p)
}
