package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// initDir holds a copy of warden-init on a tmpfs of its own, which every
// box binds its init from. The kernel names a bind in the box's
// /proc/self/mountinfo by its path inside its file system, so a bind of
// the installed binary would show the host's install path; a copy here
// shows only "/warden-init-<id>" on tmpfs "warden-lib". It stays mounted
// for the host's next Wardens (doctor does not count it as a leak). A
// variable so that tests use a directory of their own.
var initDir = StateDir + "/lib"

// initDirSize bounds initDir's tmpfs: room for a few copies at once.
const initDirSize = 256 << 20

// initLock is the lock file that orders the Wardens using initDir: a box
// holds it shared from finding its copy until its container has bound
// it; installing a copy and removing the others takes it exclusively.
// A variable so that tests use a lock of their own.
var initLock = StateDir + "/lib.lock"

// leaseInit makes sure initDir holds the copy of the init at src, and
// only it, and returns the copy's path and the release of the shared
// lock that keeps it there, to be called once the container has started.
// The copy is named by the init's build identity (initName): a rebuilt
// init gets a new copy, and the old one goes. Two versions of Warden
// starting boxes at once would each replace the other's copy; boxes
// already started keep theirs.
func leaseInit(src string) (string, func() error, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", nil, fmt.Errorf("opening the init: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", nil, fmt.Errorf("stat %s: %w", src, err)
	}
	name, err := initName(io.NewSectionReader(f, 0, st.Size))
	if err != nil {
		return "", nil, fmt.Errorf("naming the copy of %s: %w", src, err)
	}
	lock, err := os.OpenFile(initLock, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("opening %s: %w", initLock, err)
	}
	if err = installInit(lock, io.NewSectionReader(f, 0, st.Size), name, st.Size); err != nil {
		return "", nil, errors.Join(err, lock.Close())
	}
	return filepath.Join(initDir, name), lock.Close, nil
}

// initName names the copy of the init r by its Go build ID, which the
// linker derives from the build's inputs and the binary's content, so
// every box of every host running the same build sees the same name, and
// it tells a box nothing the copy's own bytes do not (a name from the
// source's inode or change time would differ between hosts and be the
// same for every tenant on one, telling tenants they share a host).
// Reading the ID costs about 0.1 ms against 25 ms for hashing the 6.5 MB;
// a file without one (not a Go build, or one linked with -buildid=) is
// named by a hash of its content.
func initName(r *io.SectionReader) (string, error) {
	h := sha256.New()
	if id := goBuildID(r); id != "" {
		h.Write([]byte("go build id " + id))
	} else if _, err := io.Copy(h, io.NewSectionReader(r, 0, r.Size())); err != nil {
		return "", err
	}
	return "warden-init-" + hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// installInit leaves lock held shared with initDir holding name, of size
// bytes, and nothing else, copying it from r if need be.
func installInit(lock *os.File, r io.Reader, name string, size int64) error {
	fd := int(lock.Fd())
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fmt.Errorf("locking %s: %w", initLock, err)
	}
	if onlyCopy(name, size) {
		return nil
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", initLock, err)
	}
	if !onlyCopy(name, size) {
		if err := mountInitDir(); err != nil {
			return err
		}
		if err := replaceCopies(r, name, size); err != nil {
			return fmt.Errorf("copying the init to %s: %w", initDir, err)
		}
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fmt.Errorf("locking %s: %w", initLock, err)
	}
	return nil
}

// onlyCopy says initDir is mounted and holds name, whole, and nothing else.
func onlyCopy(name string, size int64) bool {
	ents, err := os.ReadDir(initDir)
	if err != nil || len(ents) != 1 || ents[0].Name() != name || !mounted() {
		return false
	}
	fi, err := ents[0].Info()
	return err == nil && fi.Size() == size && fi.Mode().Perm() == 0o555
}

// replaceCopies writes r to name, mode 0555, through a temporary name so
// no box binds half a copy, unless it is there whole, and removes every
// other entry: boxes that bound one keep it until they end.
func replaceCopies(r io.Reader, name string, size int64) error {
	dst := filepath.Join(initDir, name)
	if fi, err := os.Stat(dst); err != nil || fi.Size() != size || fi.Mode().Perm() != 0o555 {
		if err := copyExecutable(r, dst); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(initDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() != name {
			if err := os.Remove(filepath.Join(initDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// copyExecutable writes r to dst, mode 0555, through dst.tmp.
func copyExecutable(r io.Reader, dst string) error {
	tmp := dst + ".tmp"
	w, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|unix.O_CLOEXEC, 0o555)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o555)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// mounted says initDir is a mount of its own: its device is not its
// parent directory's.
func mounted() bool {
	var dir, parent unix.Stat_t
	return unix.Stat(initDir, &dir) == nil && unix.Stat(filepath.Dir(initDir), &parent) == nil && dir.Dev != parent.Dev
}

// mountInitDir mounts initDir's tmpfs unless it is mounted already.
func mountInitDir() error {
	if err := os.MkdirAll(initDir, 0o755); err != nil {
		return err
	}
	if mounted() {
		return nil
	}
	data := fmt.Sprintf("mode=0755,size=%d", initDirSize)
	if err := unix.Mount("warden-lib", initDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting tmpfs at %s: %w", initDir, err)
	}
	return nil
}
