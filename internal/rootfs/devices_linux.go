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
// holding each of Devices as a character node of its known number.
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
		if unix.Lstat(filepath.Join(dir, d.Name), &st) != nil || !isDevice(&st, d) || st.Uid != 0 {
			return false
		}
	}
	return true
}

// deviceMode is every device node's mode: a character device all may
// read and write.
const deviceMode = unix.S_IFCHR | 0o666

// isDevice says st is d's node: a character device of d's number and
// deviceMode's permissions.
func isDevice(st *unix.Stat_t, d Device) bool {
	return st.Mode == deviceMode && st.Rdev == unix.Mkdev(d.Major, d.Minor)
}

// mountDevices makes a detached tmpfs, makes the nodes in it by their
// known numbers (never copying whatever the host's /dev holds) and only
// then attaches it at dir, so no one ever sees it half made.
func mountDevices(dir string) error {
	mnt, err := detachedTmpfs(map[string]string{"mode": "0755", "size": "4k", "nr_inodes": "16"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer closeFD(mnt, "the devices' tmpfs")
	for _, d := range Devices {
		if err := unix.Mknodat(mnt, d.Name, deviceMode, int(unix.Mkdev(d.Major, d.Minor))); err != nil {
			return fmt.Errorf("mknod %s: %w", d.Name, err)
		}
		if err := unix.Fchmodat(mnt, d.Name, deviceMode&0o7777, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", d.Name, err)
		}
	}
	return unix.MoveMount(mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
