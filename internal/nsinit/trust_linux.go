package nsinit

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenTrusted opens the executable at p as a descriptor for fstat and
// exec only (O_PATH), refusing a symlink at p (O_NOFOLLOW), and returns it
// only if no one but root or this user can change what it runs: the file
// itself and the directory holding it must be owned by one of them and
// writable by neither group nor others. The file's checks are made on the
// opened descriptor, so executing that descriptor (ExecFD) runs exactly
// the file checked; the directory's checks keep anyone else from putting
// another file at p afterwards. A refusal wraps ErrUntrusted with what is
// wrong; a missing file wraps fs.ErrNotExist.
func OpenTrusted(p string) (*os.File, error) {
	return openTrusted(p, unix.O_PATH, true)
}

// OpenTrustedData opens the file at p for reading under OpenTrusted's
// rules, less the exec bit: for what a trusted program is given to load
// (a VM's kernel and initramfs), which whoever could change could run
// their code in its place. O_NONBLOCK keeps a FIFO put there from
// blocking the open; the fstat then refuses it.
func OpenTrustedData(p string) (*os.File, error) {
	return openTrusted(p, unix.O_RDONLY|unix.O_NONBLOCK, false)
}

func openTrusted(p string, mode int, exec bool) (*os.File, error) {
	fd, err := unix.Open(p, mode|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		closeQuietly(f)
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if err := trustedFile(p, &st, exec); err != nil {
		closeQuietly(f)
		return nil, err
	}
	if err := trustedDir(filepath.Dir(p)); err != nil {
		closeQuietly(f)
		return nil, err
	}
	return f, nil
}

// trustedFile checks a file's fstat: a regular file (its owner can
// execute it, if exec), owned by root or this user, writable by no one
// else.
func trustedFile(p string, st *unix.Stat_t, exec bool) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%w: %s is a symlink", ErrUntrusted, p)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: %s is not a regular file", ErrUntrusted, p)
	case exec && st.Mode&0o100 == 0:
		return fmt.Errorf("%w: %s is not executable by its owner", ErrUntrusted, p)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by group or others", ErrUntrusted, p)
	case !trustedOwner(st.Uid):
		return fmt.Errorf("%w: %s is owned by uid %d, neither root nor this user", ErrUntrusted, p, st.Uid)
	}
	return nil
}

// trustedDir checks the directory holding a trusted file: whoever can
// write it can put another file in the file's place.
func trustedDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	switch {
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: directory %s is writable by group or others", ErrUntrusted, dir)
	case !trustedOwner(st.Uid):
		return fmt.Errorf("%w: directory %s is owned by uid %d, neither root nor this user", ErrUntrusted, dir, st.Uid)
	}
	return nil
}

// OpenTrustedTree is OpenTrusted with every directory above p's held to
// account too, for a binary that is run again by its path after the check
// (runsc, which warden runs as root for each step of a box): anyone who
// could rename a directory above it could put another tree in its place
// after the check. A directory writable by group or others passes only
// with its sticky bit set and the entry below it owned by root or this
// user, whom the sticky bit lets alone rename it (/tmp/x of root's). p
// must be absolute and free of symbolic links (filepath.EvalSymlinks).
func OpenTrustedTree(p string) (*os.File, error) {
	if err := trustedAncestors(filepath.Dir(p)); err != nil {
		return nil, err
	}
	return OpenTrusted(p)
}

// trustedAncestors checks each directory above dir, down from /, for
// OpenTrustedTree.
func trustedAncestors(dir string) error {
	for d := filepath.Clean(dir); d != "/"; d = filepath.Dir(d) {
		parent := filepath.Dir(d)
		var pst, dst unix.Stat_t
		if err := unix.Stat(parent, &pst); err != nil {
			return fmt.Errorf("stat %s: %w", parent, err)
		}
		if !trustedOwner(pst.Uid) {
			return fmt.Errorf("%w: directory %s is owned by uid %d, neither root nor this user", ErrUntrusted, parent, pst.Uid)
		}
		if pst.Mode&0o022 == 0 {
			continue
		}
		if pst.Mode&unix.S_ISVTX == 0 {
			return fmt.Errorf("%w: directory %s is writable by group or others", ErrUntrusted, parent)
		}
		if err := unix.Lstat(d, &dst); err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if !trustedOwner(dst.Uid) {
			return fmt.Errorf("%w: %s, in sticky directory %s, is owned by uid %d, neither root nor this user", ErrUntrusted, d, parent, dst.Uid)
		}
	}
	return nil
}

func trustedOwner(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// ExecFD replaces this process with the program open at f (from
// OpenTrusted), argv and env as given. It executes /proc/self/fd/N, the
// descriptor itself rather than the path it was opened at, so the file
// checked is the file run. The descriptor stays close-on-exec, so the new
// program inherits no handle on its own file, which is why the program
// must be a binary: an interpreter script, told to read itself at
// /dev/fd/N, would find it closed. It returns only on failure.
func ExecFD(f *os.File, argv, env []string) error {
	return unix.Exec(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), argv, env)
}

func closeQuietly(f *os.File) {
	if err := f.Close(); err != nil {
		slog.Warn("closing a refused binary's descriptor", "path", f.Name(), "err", err)
	}
}
