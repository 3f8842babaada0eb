package rootfs

import (
	"fmt"
	"log"

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

// detachedTmpfs is a new tmpfs with opts, mounted nowhere yet with attrs
// (MOUNT_ATTR_*): its descriptor reaches it (as /proc/self/fd/N, or as
// the directory of *at calls) so it can be filled before anyone sees it,
// then attached with move_mount. The caller closes it.
func detachedTmpfs(opts map[string]string, attrs int) (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen: %w", err)
	}
	defer closeFD(fsfd, "the tmpfs context")
	if err := unix.FsconfigSetString(fsfd, "source", "tmpfs"); err != nil {
		return -1, fmt.Errorf("tmpfs source: %w", err)
	}
	for k, v := range opts {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return -1, fmt.Errorf("tmpfs option %s=%s: %w", k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("creating the tmpfs: %w", err)
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount: %w", err)
	}
	return mnt, nil
}

// closeFD closes fd, logging a failure (what names it): a cleanup error is
// never dropped silently, and it cannot undo what was done with fd.
func closeFD(fd int, what string) {
	if err := unix.Close(fd); err != nil {
		log.Printf("closing %s (fd %d): %v", what, fd, err)
	}
}
