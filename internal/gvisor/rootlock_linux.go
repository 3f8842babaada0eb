package gvisor

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A template's shared root (img-<digest>-<layout> in StateDir) is used
// by boxes of every store on the host, while `warden template gc` of one
// store removes the roots of templates it no longer holds. A box holds a
// shared flock on its root's directory from before its bundle names it
// until it ends; gc takes an exclusive one, without waiting, before
// renaming a root away, and skips a root it cannot lock. A box that
// locked a root gc renamed meanwhile sees it (the path is no longer the
// directory it locked) and writes the root again.

// lockRootTries bounds how often a box retries a root that gc took from
// under it, and lockRootWait how long it waits for gc's short exclusive
// hold (a rename) each time.
const (
	lockRootTries = 3
	lockRootWait  = 5 * time.Second
)

// holdRoot takes a shared lock on the root dir for a box: the returned
// file holds it until closed. It fails with errRootGone if dir was
// renamed or replaced while it locked (gc removed it: write it again).
func holdRoot(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errRootGone
	}
	if err != nil {
		return nil, fmt.Errorf("opening the template root %q: %w", dir, err)
	}
	if err := flockWait(f, unix.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the template root %q: %w", dir, err)
	}
	if !samePath(f, dir) {
		f.Close()
		return nil, errRootGone
	}
	return f, nil
}

// errRootGone is holdRoot's error for a root gc removed.
var errRootGone = errors.New("the template root was removed while the box locked it")

// flockWait takes the lock how on f, waiting at most lockRootWait.
func flockWait(f *os.File, how int) error {
	deadline := time.Now().Add(lockRootWait)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// samePath reports whether dir is still the directory f has open.
func samePath(f *os.File, dir string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(dir, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// lockUnusedRoot takes gc's exclusive lock on the root dir, without
// waiting: ok is false if a box holds it (the root is in use).
func lockUnusedRoot(dir string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, fmt.Errorf("opening the template root %q: %w", dir, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("locking the template root %q: %w", dir, err)
	}
	return f, true, nil
}
