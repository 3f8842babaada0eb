package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// A template's shared root (img-<digest>-<layout> in a backend's state
// directory, SharedImageTemplate) is used by boxes of every store on the
// host, while `warden template gc` of one store removes the roots of
// templates it no longer holds. A box holds a shared flock on its root's
// directory from before anything names it (a gVisor bundle, a microVM's
// assembled root) until it ends; gc takes an exclusive one, without
// waiting, before renaming a root away, and skips a root it cannot lock.
// A box that locked a root gc renamed meanwhile sees it (the path is no
// longer the directory it locked) and writes the root again. The gVisor
// and microvm backends share this code; each keeps its roots in its own
// state directory.

// holdTries bounds how often a box retries a root that gc took from
// under it, and holdWait how long it waits for gc's short exclusive hold
// (a rename) each time.
const (
	holdTries = 3
	holdWait  = 5 * time.Second
)

// HoldImageTemplate writes the shared root under base of the template
// r (r.Dir its tree, r.Digest its manifest's digest) once per digest, as
// SharedImageTemplate does, and takes a shared lock on it for a box: the
// returned file holds it until closed, and gc (RemoveImageTemplates)
// leaves the root while it is held. A root gc removed meanwhile is
// written again.
func HoldImageTemplate(base string, r spec.Root) (Template, *os.File, error) {
	for range holdTries {
		tmpl, err := SharedImageTemplate(base, r.Dir, r.Digest)
		if err != nil {
			return tmpl, nil, err
		}
		f, err := holdRoot(tmpl.Dir)
		if !errors.Is(err, errRootGone) {
			return tmpl, f, err
		}
	}
	return Template{}, nil, fmt.Errorf("template %q: its root was removed %d times while the box started (warden template gc running?): start it again", r.Template, holdTries)
}

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
		_ = f.Close() // read-only; the lock's error is the one to report
		return nil, fmt.Errorf("locking the template root %q: %w", dir, err)
	}
	if !samePath(f, dir) {
		_ = f.Close() // read-only; the root is gone, which is what to report
		return nil, errRootGone
	}
	return f, nil
}

// errRootGone is holdRoot's error for a root gc removed.
var errRootGone = errors.New("the template root was removed while the box locked it")

// flockWait takes the lock how on f, waiting at most holdWait.
func flockWait(f *os.File, how int) error {
	deadline := time.Now().Add(holdWait)
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
		_ = f.Close() // read-only; the root is in use, nothing to report
		return nil, false, nil
	}
	if err != nil {
		_ = f.Close() // read-only; the lock's error is the one to report
		return nil, false, fmt.Errorf("locking the template root %q: %w", dir, err)
	}
	return f, true, nil
}

// imageRootName matches the name of a template's shared root in a state
// directory (SharedImageTemplate: img-<digest hex>-<layout>).
var imageRootName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^img-([0-9a-f]{64})-[0-9a-f]+$`) })

// UnusedImageTemplates lists the shared roots in dir (a backend's state
// directory) of templates keep does not hold (keep gets
// "sha256:<hex>"), leaving out those in used (paths a backend knows its
// boxes name): what RemoveImageTemplates would remove, for doctor.
func UnusedImageTemplates(dir string, keep func(digest string) bool, used map[string]bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		m := imageRootName().FindStringSubmatch(e.Name())
		p := filepath.Join(dir, e.Name())
		if m != nil && e.IsDir() && !keep("sha256:"+m[1]) && !used[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// RemoveImageTemplates removes the shared roots UnusedImageTemplates
// lists: `warden template gc` and `rm` call it (through each backend)
// under the store's lock, so a template's root goes with it, from memory
// (/run) where it would otherwise stay until reboot. Stores share a
// backend's state directory (a root is a cache, keyed by digest), so a
// root another store's box uses is kept: a root is renamed away only
// under an exclusive lock taken without waiting, so a root a box holds
// (HoldImageTemplate) is skipped. It returns the digests removed.
func RemoveImageTemplates(dir string, keep func(digest string) bool, used map[string]bool) ([]string, error) {
	unused, err := UnusedImageTemplates(dir, keep, used)
	var removed []string
	var errs []error
	for _, p := range unused {
		gone, err := renameUnused(dir, p)
		if err != nil {
			errs = append(errs, err)
		}
		if gone == "" {
			continue
		}
		if err := os.RemoveAll(gone); err != nil {
			errs = append(errs, fmt.Errorf("removing the template root %q: %w", gone, err))
			continue
		}
		removed = append(removed, "sha256:"+imageRootName().FindStringSubmatch(filepath.Base(p))[1])
	}
	return removed, errors.Join(append([]error{err}, errs...)...)
}

// renameUnused renames the root p away under gc's exclusive lock, and
// returns where to ("" if a box holds it, or on error). Renamed first: a
// box starting now writes a fresh root rather than binding one half
// removed, and a crash leaves a tmp-<pid> entry the next Warden's stale
// sweep removes.
func renameUnused(dir, p string) (gone string, err error) {
	f, ok, err := lockUnusedRoot(p)
	if !ok {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("unlocking the template root %q: %w", p, cerr))
		}
	}()
	gone = filepath.Join(dir, "tmp-"+strconv.Itoa(os.Getpid())+"-gc-"+filepath.Base(p))
	if err := os.Rename(p, gone); err != nil {
		return "", fmt.Errorf("removing the template root %q: %w", p, err)
	}
	return gone, nil
}
