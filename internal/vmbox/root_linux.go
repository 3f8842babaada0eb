package vmbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// roAttrs are the attributes of every mount in a box's root, set on the
// whole tree at once (AT_RECURSIVE, so a mount nested in a bound host
// directory gets them too): read-only, no set-id programs, no devices.
const roAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

// assembleRoot makes the box's root at dir on the host, as the gVisor
// bundle's mounts make it: the template's directory, and each of its
// binds (the host's /usr and the /etc files it shares) from the same path
// under its From, all read-only. The VM gets dir as one 9p share (which
// remaps the inode numbers of the mounts it spans): one device for the
// whole root, whatever the template binds, and nothing of the host the
// box would not see. The tree is private before anything is bound into
// it: on a host whose mounts are shared (systemd's default) a bind into
// a bind of the template would otherwise appear in the template itself
// and every peer of /run, and outlive the box there.
func assembleRoot(tmpl rootfs.Template, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := bind(tmpl.Dir, dir); err != nil {
		return err
	}
	if err := setattr(dir, &unix.MountAttr{Propagation: unix.MS_PRIVATE}); err != nil {
		return err
	}
	for _, p := range tmpl.Binds {
		if err := bind(filepath.Join("/", tmpl.From, p), filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	return setattr(dir, &unix.MountAttr{Attr_set: roAttrs, Propagation: unix.MS_PRIVATE})
}

// bind binds src at dst with the mounts below src (the share spans them;
// QEMU's remap keeps their inode numbers apart).
func bind(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %q at %q: %w", src, dst, err)
	}
	return nil
}

// setattr sets attr on the mount at dir and every mount below it.
func setattr(dir string, attr *unix.MountAttr) error {
	if err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, attr); err != nil {
		return fmt.Errorf("setting the attributes of the mounts at %q: %w", dir, err)
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
