package fontcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// dirent is one entry of a directory listing: its name and whether it
// is a directory.
type dirent struct {
	name string
	dir  bool
}

// direntBuf is getdents' buffer size, one page: a font directory of
// about a hundred files is read in one call.
const direntBuf = 4 << 10

// listDir lists dir with raw system calls (open, getdents, close), in
// name order, as filepath.WalkDir reads it but without an os.File (its
// poller registration, sorting of DirEntry values): RootKey lists a
// handful of directories on every run. An entry whose type the
// filesystem does not give is lstat'ed. On an error, what was read is
// returned with it; a failed close is returned too, joined to any other.
func listDir(dir string, buf []byte) (_ []dirent, err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := unix.Close(fd); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing directory %q: %w", dir, cerr))
		}
	}()
	var out []dirent
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return sortDirents(out), err
		}
		if n <= 0 {
			return sortDirents(out), nil
		}
		out = parseDirents(dir, buf[:n], out)
	}
}

// parseDirents appends the entries of one getdents answer, skipping "."
// and "..": linux_dirent64 is u64 inode, i64 offset, u16 record length,
// u8 type, then the name, NUL-terminated.
func parseDirents(dir string, b []byte, out []dirent) []dirent {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:]))
		if reclen < 19 || reclen > len(b) {
			return out
		}
		typ, name := b[18], b[19:reclen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		b = b[reclen:]
		if s := string(name); s != "." && s != ".." {
			out = append(out, dirent{name: s, dir: isDir(dir, s, typ)})
		}
	}
	return out
}

// isDir reads a dirent's type, or lstat's the entry when the filesystem
// leaves it unknown.
func isDir(dir, name string, typ byte) bool {
	if typ != unix.DT_UNKNOWN {
		return typ == unix.DT_DIR
	}
	var st unix.Stat_t
	return unix.Lstat(filepath.Join(dir, name), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

func sortDirents(d []dirent) []dirent {
	slices.SortFunc(d, func(a, b dirent) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return d
}
