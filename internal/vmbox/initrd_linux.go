package vmbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// initrdPrefix starts the guest initramfs files in StateDir.
const initrdPrefix = "initrd-"

// guestInit is the warden-init beside this warden (static, as make build
// builds it), which every box boots as its /init: opened once, under
// nsinit's trust rule, and held for the process's life, so the
// initramfs is always built from the binary this warden started with
// (an upgrade in place must not hand a running warden another protocol).
type guestInit struct {
	// mu guards initrd, so one box opens or writes it and the rest wait.
	mu sync.Mutex
	f  *os.File
	// id is f's identity when this warden started (initID).
	id string
	// name is the initramfs's file in StateDir: initrdPrefix and a
	// digest of id.
	name string
	// initrd is the initramfs, opened by the first box and held: every
	// box gets it reopened through this descriptor, and a name another
	// build's warden removed (pruneInitrds, at its start) is made again
	// from it, never from warden-init.
	initrd *os.File
}

// openGuestInit opens the warden-init beside this warden.
func openGuestInit(dir string, log *slog.Logger) (*guestInit, error) {
	p, err := nsinit.BinaryPath()
	if err != nil {
		return nil, err
	}
	if filepath.Base(p) != nsinit.InitName {
		return nil, fmt.Errorf("the microvm backend boots %s as the guest's /init: install it beside warden (make build)", nsinit.InitName)
	}
	f, err := nsinit.OpenTrustedData(p)
	if err != nil {
		return nil, fmt.Errorf("the guest's init: %w", err)
	}
	g, err := newGuestInit(f, dir, log)
	if err != nil {
		return nil, fmt.Errorf("the guest's init: %w", errors.Join(err, f.Close()))
	}
	return g, nil
}

// newGuestInit names the initramfs of the warden-init f in dir and
// removes every other build's there: each is several MB of /run's
// memory, and a running warden of another build holds its own open.
func newGuestInit(f *os.File, dir string, log *slog.Logger) (*guestInit, error) {
	id, err := initID(f)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(id))
	g := &guestInit{f: f, id: id, name: filepath.Join(dir, initrdPrefix+hex.EncodeToString(sum[:16]))}
	if err := pruneInitrds(dir, filepath.Base(g.name)); err != nil {
		log.Warn("removing other builds' guest initramfs files", "err", err)
	}
	return g, nil
}

// initID is the identity of the binary f that names its initramfs:
// device, inode, size, modification and change times, and the archive's
// layout (microvm.InitramfsLayout), which a write to the file or its
// replacement changes, so a new warden-init gets a new file; the file is
// not read for it (write checks it again around its copy).
func initID(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("v%d %d %d %d %d.%d %d.%d", microvm.InitramfsLayout, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// open returns the initramfs, reopened from the descriptor this warden
// holds, checked as a guest file (root's, writable by no one else, no
// symlink) when the first box opened it by name, and written first if it
// was missing: every box of every warden of this warden-init shares the
// one file, which QEMU's root binds read-only, instead of each building
// its 7 MB in memory and writing them into its own root.
func (g *guestInit) open() (*os.File, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.hold(); err != nil {
		return nil, fmt.Errorf("the guest's initramfs %s: %w", g.name, err)
	}
	// Reopened, not copied: the same file, with an offset of its own.
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", g.initrd.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopening the guest's initramfs: %w", err)
	}
	return os.NewFile(uintptr(fd), g.name), nil
}

// hold makes g.initrd the initramfs with its name: opened by the first
// box, and again from its own bytes when the name is gone (a warden of
// another build removed it at its start): the kernel binds no file
// without a name into QEMU's root, and warden-init is not read again.
func (g *guestInit) hold() error {
	if g.initrd != nil {
		var st unix.Stat_t
		if err := unix.Fstat(int(g.initrd.Fd()), &st); err != nil {
			return err
		}
		if st.Nlink > 0 {
			return nil
		}
		held := g.initrd
		g.initrd = nil
		err := g.write(func(out *os.File) error { return copyHeld(out, held, st.Size) })
		if cerr := held.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the unnamed copy: %w", cerr))
		}
		if err != nil {
			return err
		}
	}
	f, err := g.first()
	if err != nil {
		return err
	}
	g.initrd = f
	return nil
}

// copyHeld writes the size bytes of the held initramfs to out, readable
// by all.
func copyHeld(out, held *os.File, size int64) error {
	if _, err := io.Copy(out, io.NewSectionReader(held, 0, size)); err != nil {
		return err
	}
	return out.Chmod(0o444)
}

// first opens the initramfs by its name, writing it from warden-init
// first where missing. It is opened by name even after this warden wrote
// it: the descriptor O_TMPFILE gave has no name to bind. Another build's
// warden removes the name only at its start, so a second miss is an
// error.
func (g *guestInit) first() (*os.File, error) {
	f, err := nsinit.OpenTrustedData(g.name)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if err := g.write(g.fill); err != nil {
		return nil, err
	}
	return nsinit.OpenTrustedData(g.name)
}

// write has fill write the initramfs to an unnamed file (O_TMPFILE) and
// links it at its name once complete, so no one sees it half written and
// a crash leaves nothing (a warden that linked its own first wins: the
// same bytes).
func (g *guestInit) write(fill func(*os.File) error) error {
	fd, err := unix.Open(filepath.Dir(g.name), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("writing it: %s's file system cannot make unnamed files (O_TMPFILE): put it on a tmpfs: %w", filepath.Dir(g.name), err)
	}
	if err != nil {
		return fmt.Errorf("writing it: %w", err)
	}
	out := os.NewFile(uintptr(fd), g.name)
	err = fill(out)
	if err == nil {
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, g.name, unix.AT_SYMLINK_FOLLOW)
	}
	if errors.Is(err, unix.EEXIST) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("writing it: %w", err)
	}
	return errors.Join(err, out.Close())
}

// unchanged fails if g's binary is no longer what named the initramfs: a
// warden-init rewritten in place (same inode) since this warden started
// would otherwise be copied, perhaps half written, under the old name.
func (g *guestInit) unchanged() error {
	id, err := initID(g.f)
	if err != nil {
		return err
	}
	if id != g.id {
		return fmt.Errorf("%s changed since this warden started (rewritten in place): restart warden", nsinit.InitName)
	}
	return nil
}

// fill writes the initramfs of g's binary, read from its start, to out,
// checking before and after that the binary did not change, readable by
// all: QEMU reads it under its own uid, and O_TMPFILE's mode
// is subject to the umask.
func (g *guestInit) fill(out *os.File) error {
	if err := g.unchanged(); err != nil {
		return err
	}
	if _, err := g.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := microvm.WriteInitramfs(out, g.f); err != nil {
		return err
	}
	if err := g.unchanged(); err != nil {
		return err
	}
	return out.Chmod(0o444)
}

// pruneInitrds removes every initramfs file in dir but keep.
func pruneInitrds(dir, keep string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, initrdPrefix) && n != keep {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
