package rootfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %q on %q: %w", src, dst, err)
	}
	return nil
}

// Attribute sets for restrict.
const (
	readOnly = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	noDevice = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
)

// bindRO binds src at dst, read-only, nosuid and nodev; recursive binds
// the mounts below src too, and restricts every one of them.
func bindRO(src, dst string, recursive bool) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := mount(src, dst, "", flags, ""); err != nil {
		return err
	}
	return restrict(dst, readOnly, recursive)
}

// restrict adds attributes (MOUNT_ATTR_*) to the mount at dst and, with
// recursive, to every mount below it, in one mount_setattr call. Adding a
// restriction is allowed even where the kernel locked a mount's flags when
// it crossed into this user namespace, which a remount would have to
// repeat; and a remount never reaches submounts.
func restrict(dst string, attrs uint64, recursive bool) error {
	var flags uint
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, flags, &unix.MountAttr{Attr_set: attrs}); err != nil {
		return fmt.Errorf("restricting mount %q: %w", dst, err)
	}
	return nil
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
