package fontcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// beneath resolves a path inside a sandbox's tree: never through a link
// or a mount, never out of it.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// maxNames bounds the names read from the build's cache directory.
const maxNames = 64

// ReadResult reads the font list a build sandbox left in its HOME, the
// host directory home (the build's scratch), as hostile input: reached
// through no link and no other mount, exactly one name of a font list,
// a regular file (a fifo or device is refused, unopened or unread), at
// most MaxBytes, and a JSON object whose _version is its name's. A HOME
// with no list is the zero File: the root's python has no matplotlib.
func ReadResult(home string) (File, error) {
	hfd, err := unix.Open(home, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return File{}, fmt.Errorf("opening the build's home %q: %w", home, err)
	}
	defer unix.Close(hfd)
	dfd, err := unix.Openat2(hfd, Dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if errors.Is(err, unix.ENOENT) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("opening ~/%s of the build: %w", Dir, err)
	}
	dir := os.NewFile(uintptr(dfd), filepath.Join(home, Dir))
	defer dir.Close()
	name, err := listName(dir)
	if err != nil || name == "" {
		return File{}, err
	}
	data, err := readList(dfd, name)
	if err != nil {
		return File{}, fmt.Errorf("font list %q of the build: %w", name, err)
	}
	f := File{Name: name, Data: data}
	if err := f.check(); err != nil {
		return File{}, err
	}
	return f, nil
}

// listName is the one font list's name in dir, "" when there is none.
func listName(dir *os.File) (string, error) {
	names, err := dir.Readdirnames(maxNames)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("listing ~/%s of the build: %w", Dir, err)
	}
	var found []string
	for _, n := range names {
		if namePattern().MatchString(n) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("~/%s of the build holds %d font lists (%q), where matplotlib writes one", Dir, len(found), found)
}

// readList reads the regular file name in dirfd, at most MaxBytes.
func readList(dirfd int, name string) ([]byte, error) {
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return nil, fmt.Errorf("opening: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (mode %o)", st.Mode)
	}
	if st.Size > MaxBytes {
		return nil, fmt.Errorf("%d bytes, over %d", st.Size, MaxBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("grew past %d bytes while read", MaxBytes)
	}
	return b, nil
}
