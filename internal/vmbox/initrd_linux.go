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
	// mu keeps writes apart: each reads f from its start.
	mu sync.Mutex
	f  *os.File
	// name is the initramfs's file in StateDir: initrdPrefix and a
	// digest of f's identity (initrdName).
	name string
}

// openGuestInit opens the warden-init beside this warden.
func openGuestInit(dir string) (*guestInit, error) {
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
	name, err := initrdName(f)
	if err != nil {
		return nil, fmt.Errorf("the guest's init: %w", errors.Join(err, f.Close()))
	}
	return &guestInit{f: f, name: filepath.Join(dir, name)}, nil
}

// initrdName names the initramfs of the binary f: a digest of its
// identity (device, inode, size, modification and change times, and
// the archive's layout version), which any write to the file or
// replacement of it changes, so a new warden-init gets a new file; the
// file is not read for it.
func initrdName(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	id := fmt.Sprintf("v1 %d %d %d %d.%d %d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	sum := sha256.Sum256([]byte(id))
	return initrdPrefix + hex.EncodeToString(sum[:16]), nil
}

// open returns the initramfs file, opened and checked as a guest file
// (root's, writable by no one else, no symlink), writing it first if
// it is missing: every box of every warden of this warden-init shares
// the one file, which QEMU's root binds read-only, instead of each
// building its 7 MB in memory and writing them into its own root.
// Another build's warden may remove it (pruneInitrds) between the write
// and the open, so a missing file is written again once.
func (g *guestInit) open(log *slog.Logger) (*os.File, error) {
	for try := 0; ; try++ {
		f, err := nsinit.OpenTrustedData(g.name)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 1 {
			if err != nil {
				return nil, fmt.Errorf("the guest's initramfs: %w", err)
			}
			return f, nil
		}
		if err := g.write(); err != nil {
			return nil, fmt.Errorf("writing the guest's initramfs %s: %w", g.name, err)
		}
		// Each is several MB of /run's memory; a running warden of
		// another build writes its own again.
		if err := pruneInitrds(filepath.Dir(g.name), filepath.Base(g.name)); err != nil {
			log.Warn("removing other builds' guest initramfs files", "err", err)
		}
	}
}

// write writes the initramfs as an unnamed file (O_TMPFILE) and links it
// at its name once complete, so no one sees it half written and a crash
// leaves nothing; a warden that linked it first wins.
func (g *guestInit) write() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	fd, err := unix.Open(filepath.Dir(g.name), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), g.name)
	err = g.fill(out)
	if err == nil {
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, g.name, unix.AT_SYMLINK_FOLLOW)
	}
	if errors.Is(err, unix.EEXIST) {
		err = nil
	}
	return errors.Join(err, out.Close())
}

// fill writes the initramfs of g's binary, read from its start, to out,
// readable by all: QEMU reads it under its own uid, and O_TMPFILE's mode
// is subject to the umask.
func (g *guestInit) fill(out *os.File) error {
	if _, err := g.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := microvm.WriteInitramfs(out, g.f); err != nil {
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
