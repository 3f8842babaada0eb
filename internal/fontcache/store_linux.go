package fontcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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

// dropOthers removes every record and attempt mark but k's record: the
// store holds the lists of one root (the host's), whose older keys are
// never asked for again, and k's list is saved.
func (s Store) dropOthers(k Key) error {
	hex := filepath.Join(s.Dir, strings.Repeat("[0-9a-f]", 64))
	names, err := filepath.Glob(hex)
	if err != nil {
		return err
	}
	marks, err := filepath.Glob(hex + attemptSuffix)
	if err != nil {
		return err
	}
	names = append(names, marks...)
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

// makeDir makes the store's directory and its parent (Warden's cache
// directory) if missing, owner-only, and checks them: every ancestor
// above those two must exist already.
func (s Store) makeDir() error {
	for _, d := range []string{filepath.Dir(s.Dir), s.Dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("making the font cache %q: %w", d, err)
		}
	}
	return s.checkDir()
}

// checkDir refuses a store directory that is a link, or that anyone but
// this user could change, or that lies below such a directory.
func (s Store) checkDir() error {
	if err := checkAncestors(s.Dir); err != nil {
		return err
	}
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

// checkAncestors refuses dir unless every directory above it is this
// user's and writable by no one else, so that no one else can replace
// the store under it. A sticky directory of this user's (/tmp, as
// root) passes: others may add names to it but not rename or remove
// this user's.
func checkAncestors(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("font cache %q: %w", dir, err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("checking the font cache's ancestor: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		open := st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0
		if !fi.IsDir() || int(st.Uid) != os.Geteuid() || open {
			return fmt.Errorf("font cache %q lies below %q, which is not this user's directory writable by it alone (mode %o, owner %d): move the cache or fix %q", dir, d, st.Mode, st.Uid, d)
		}
		if d == "/" {
			return nil
		}
	}
}

// RetryAfter spaces the build attempts of one key: a root whose build
// saved nothing (it timed out, hit its memory limit, was killed, or its
// list was refused) is built again at most this often, not on every run.
const RetryAfter = 10 * time.Minute

// attemptSuffix names a key's attempt mark: a file whose mtime is when a
// build of the key last started; Save removes it with the list saved.
const attemptSuffix = ".attempt"

// Attempted says a build of k started less than RetryAfter ago and saved
// no list: the next build waits. A mark dated in the future is ignored,
// so that a clock set back does not stop builds for good.
func (s Store) Attempted(k Key) bool {
	fi, err := os.Lstat(filepath.Join(s.Dir, k.Sum+attemptSuffix))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	age := time.Since(fi.ModTime())
	return age >= 0 && age < RetryAfter
}

// MarkAttempt records that a build of k starts now (see Attempted).
func (s Store) MarkAttempt(k Key) error {
	p := filepath.Join(s.Dir, k.Sum+attemptSuffix)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("marking a font list build in %q: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	_, err = f.WriteString(time.Now().UTC().Format(time.RFC3339) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("marking a font list build in %q: %w", p, err)
	}
	return nil
}
