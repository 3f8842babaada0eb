package vmbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// roBind are the flags of every bind in a box's root: read-only, no
// set-id programs, no devices.
const roBind = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV

// assembleRoot makes the box's root at dir on the host, as the gVisor
// bundle's mounts make it: the template's directory, and each of its
// binds (the host's /usr and the /etc files it shares) from the same path
// under its From, all read-only. The VM gets dir as one 9p share (which
// remaps the inode numbers of the mounts it spans): one device for the
// whole root, whatever the template binds, and nothing of the host the
// box would not see.
func assembleRoot(tmpl rootfs.Template, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := bindRO(tmpl.Dir, dir); err != nil {
		return err
	}
	for _, p := range tmpl.Binds {
		if err := bindRO(filepath.Join("/", tmpl.From, p), filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	return nil
}

// bindRO binds src at dst read-only (a bind takes its flags on a remount).
func bindRO(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %q at %q: %w", src, dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|roBind, ""); err != nil {
		return fmt.Errorf("making %q read-only: %w", dst, err)
	}
	return nil
}

// unmountRoot detaches the box's root and every bind in it, then removes
// its directory: only then may the box's directory be removed, which
// must never reach through a bind.
func unmountRoot(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // the box ended before its root was made
	case err != nil && !errors.Is(err, unix.EINVAL):
		return fmt.Errorf("unmounting %q: %w", dir, err)
	}
	return os.Remove(dir)
}
