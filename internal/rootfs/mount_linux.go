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

// bindRO binds src at dst and makes the bind read-only, nosuid and nodev.
func bindRO(src, dst string, recursive bool) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := mount(src, dst, "", flags, ""); err != nil {
		return err
	}
	return remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// remount changes a bind mount's flags. Flags the kernel locked when the
// mount crossed into this user namespace (noexec on the source, say) must be
// repeated or the remount fails with EPERM, so they are read back first.
func remount(dst string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %q: %w", dst, err)
	}
	keep := uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME | unix.MS_RDONLY)
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags|keep, ""); err != nil {
		return fmt.Errorf("remounting %q: %w", dst, err)
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
