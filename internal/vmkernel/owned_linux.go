package vmkernel

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openAt opens name in the directory dir, without following a link,
// and checks it is a kind (unix.S_IFDIR or S_IFREG) of the cache's owner
// writable by it alone; it returns the file and its size.
func (c cache) openAt(dir *os.File, name string, flags int, kind uint32) (*os.File, int64, error) {
	p := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, flags|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("opening %q: %w: remove it and run `make microvm-kernel`", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	size, err := c.checkOwned(f, kind)
	if err != nil {
		closeLogged(f)
		return nil, 0, err
	}
	return f, size, nil
}

// readFile reads name in the kernel directory dir, a regular file of the
// cache's owner of at most max bytes.
func (c cache) readFile(dir *os.File, name string, max int64) ([]byte, error) {
	f, size, err := c.openAt(dir, name, 0, unix.S_IFREG)
	if err != nil {
		return nil, err
	}
	defer closeLogged(f)
	if size > max {
		return nil, fmt.Errorf("%q has %d bytes, more than %d: remove its directory and run `make microvm-kernel`", f.Name(), size, max)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("reading %q: %w", f.Name(), err)
	}
	return b, nil
}

// openFile opens name in the kernel directory dir: a non-empty regular
// file of the cache's owner, writable by it alone, of at most maxVmlinux
// bytes.
func (c cache) openFile(dir *os.File, name string) (*os.File, error) {
	f, size, err := c.openAt(dir, name, 0, unix.S_IFREG)
	if err != nil {
		return nil, err
	}
	if size == 0 || size > maxVmlinux {
		closeLogged(f)
		return nil, fmt.Errorf("%q has %d bytes, not 1 to %d: remove its directory and run `make microvm-kernel`", f.Name(), size, maxVmlinux)
	}
	return f, nil
}

// checkOwned refuses f unless it is of kind (unix.S_IFDIR or S_IFREG),
// the cache owner's and not writable by group or others; it returns f's
// size.
func (c cache) checkOwned(f *os.File, kind uint32) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("stat %q: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != kind || int(st.Uid) != c.uid || st.Mode&0o022 != 0 {
		return 0, fmt.Errorf("microVM kernel cache entry %q is not a %s of uid %d writable by it alone "+
			"(mode %o, owner %d): remove it and run `make microvm-kernel`",
			f.Name(), kindName(kind), c.uid, st.Mode, st.Uid)
	}
	return st.Size, nil
}

func kindName(kind uint32) string {
	if kind == unix.S_IFDIR {
		return "directory"
	}
	return "file"
}

// checkAncestors refuses the cache unless every directory above it is
// root's or the owner's and writable by no one else (a sticky directory,
// /tmp, passes: others cannot rename or remove what is not theirs), so
// that no one else can replace the cache under it.
func (c cache) checkAncestors() error {
	abs, err := filepath.Abs(c.dir)
	if err != nil {
		return fmt.Errorf("microVM kernel cache %q: %w", c.dir, err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return fmt.Errorf("checking the microVM kernel cache's ancestor %q: %w", d, err)
		}
		open := st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0
		owner := int(st.Uid) == c.uid || st.Uid == 0
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || !owner || open {
			return fmt.Errorf("microVM kernel cache %q lies below %q, which is not root's directory "+
				"writable by it alone (mode %o, owner %d): fix %q", c.dir, d, st.Mode, st.Uid, d)
		}
		if d == "/" {
			return nil
		}
	}
}
