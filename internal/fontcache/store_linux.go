package fontcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxRecord bounds a record read from the store: its header and a list.
const maxRecord = MaxBytes + 4096

// Load reads k's record: found is false when there is none, or when the
// one there is not a record (another build's format), which the next
// build replaces. Save checked the list; Load checks its name and size
// only (a list matplotlib cannot parse it rebuilds, as without one). An
// error says the store cannot be trusted.
func (s Store) Load(k Key) (f File, found bool, err error) {
	if err := s.checkDir(); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return File{}, false, nil
		}
		return File{}, false, err
	}
	p := filepath.Join(s.Dir, k.Sum)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, fmt.Errorf("opening font cache %q: %w", p, err)
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	size, err := checkOwned(file, false)
	if err != nil {
		return File{}, false, err
	}
	if size > maxRecord {
		return File{}, false, nil
	}
	// One buffer of the record's size: a run's page faults grew by a
	// tenth of the list again when it was read in growing pieces.
	b := make([]byte, size)
	if _, err := io.ReadFull(file, b); err != nil {
		return File{}, false, fmt.Errorf("reading font cache %q: %w", p, err)
	}
	if f, err = decode(b); err != nil {
		return File{}, false, nil
	}
	return f, true, nil
}

// Save stores f as k's record, by an atomic rename (a reader sees the
// old record or the new one, whole), and drops the records of older keys.
func (s Store) Save(k Key, f File) error {
	if err := f.check(); err != nil {
		return err
	}
	if err := s.makeDir(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.Dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("saving a font cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename: no error to report then
	_, err = tmp.Write(f.encode())
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.Dir, k.Sum))
	}
	if err != nil {
		return fmt.Errorf("saving a font cache in %q: %w", s.Dir, err)
	}
	return s.dropOthers(k)
}

// dropOthers removes every record but k's: the store holds the lists of
// one root (the host's), whose older keys are never asked for again.
func (s Store) dropOthers(k Key) error {
	names, err := filepath.Glob(filepath.Join(s.Dir, strings.Repeat("[0-9a-f]", 64)))
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if filepath.Base(n) != k.Sum {
			errs = append(errs, os.Remove(n))
		}
	}
	return errors.Join(errs...)
}

// TryLock takes the store's build lock without waiting: held is false
// when another process holds it (a build is under way). The lock is the
// open file's: it passes to a child that inherits it and ends when the
// last holder closes it.
func (s Store) TryLock() (lock *os.File, held bool, err error) {
	if err := s.makeDir(); err != nil {
		return nil, false, err
	}
	p := filepath.Join(s.Dir, ".lock")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("opening %q: %w", p, err)
	}
	lock = os.NewFile(uintptr(fd), p)
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		lock.Close()
		return nil, false, nil
	}
	if err != nil {
		lock.Close()
		return nil, false, fmt.Errorf("locking %q: %w", p, err)
	}
	return lock, true, nil
}

// makeDir makes the store's directory, owner-only, and checks it.
func (s Store) makeDir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("making the font cache %q: %w", s.Dir, err)
	}
	return s.checkDir()
}

// checkDir refuses a store directory that is a link, or that anyone but
// this user could change.
func (s Store) checkDir() error {
	fd, err := unix.Open(s.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the font cache %q: %w", s.Dir, err)
	}
	f := os.NewFile(uintptr(fd), s.Dir)
	defer f.Close()
	_, err = checkOwned(f, true)
	return err
}

// checkOwned refuses f unless it is this user's, of the kind wanted (a
// directory or a regular file), and not writable by group or others; it
// returns f's size.
func checkOwned(f *os.File, dir bool) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("stat %q: %w", f.Name(), err)
	}
	want := uint32(unix.S_IFREG)
	if dir {
		want = unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT != want || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return 0, fmt.Errorf("font cache %q is not this user's %s writable by it alone (mode %o, owner %d): remove it", f.Name(), kind(dir), st.Mode, st.Uid)
	}
	return st.Size, nil
}

func kind(dir bool) string {
	if dir {
		return "directory"
	}
	return "file"
}
