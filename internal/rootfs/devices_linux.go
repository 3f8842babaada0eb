package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SharedDevices returns dir holding the Devices as nodes on a tmpfs of
// their own, mounting one there (as root) if it is missing. Sandboxes bind
// their device nodes from it rather than from the host's /dev: a bind
// shows its file system's mount options in /proc/self/mountinfo, and the
// host's devtmpfs is sized by the host's memory. A concurrent Warden may
// mount another one over it; either serves.
func SharedDevices(dir string) (string, error) {
	if devicesIntact(dir) {
		return dir, nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := mountDevices(dir); err != nil {
		return "", fmt.Errorf("mounting sandbox devices on %q: %w", dir, err)
	}
	if !devicesIntact(dir) {
		return "", fmt.Errorf("sandbox devices on %q are not as written", dir)
	}
	return dir, nil
}

// devicesIntact says dir is a root-owned tmpfs, writable only by root,
// holding each of Devices as the host's own node.
func devicesIntact(dir string) bool {
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Statfs(dir, &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		return false
	}
	if unix.Lstat(dir, &st) != nil || st.Uid != 0 || st.Mode&0o022 != 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	for _, d := range Devices {
		var host unix.Stat_t
		if unix.Stat("/dev/"+d, &host) != nil || unix.Lstat(filepath.Join(dir, d), &st) != nil {
			return false
		}
		if st.Mode != host.Mode || st.Rdev != host.Rdev || st.Uid != 0 {
			return false
		}
	}
	return true
}

// mountDevices makes a detached tmpfs, writes the nodes into it and only
// then attaches it at dir, so no one ever sees it half made.
func mountDevices(dir string) error {
	mnt, err := detachedTmpfs(map[string]string{"mode": "0755", "size": "4k", "nr_inodes": "16"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(mnt)
	for _, d := range Devices {
		var host unix.Stat_t
		if err := unix.Stat("/dev/"+d, &host); err != nil {
			return err
		}
		if err := unix.Mknodat(mnt, d, host.Mode, int(host.Rdev)); err != nil {
			return fmt.Errorf("mknod %s: %w", d, err)
		}
		if err := unix.Fchmodat(mnt, d, host.Mode&0o7777, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	return unix.MoveMount(mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
