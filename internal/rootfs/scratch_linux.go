package rootfs

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ScratchDirs are the writable directories of a box a runtime builds, and
// where each is mounted: all four live on one host tmpfs, so DiskBytes and
// Inodes bound them together, as in the native root.
var ScratchDirs = map[string]string{
	"workspace": "/workspace",
	"tmp":       "/tmp",
	"home":      "/home/sandbox",
	"shm":       "/dev/shm",
}

// MountScratch mounts a tmpfs of size bytes and inodes inodes at dir (made
// if missing) with ScratchDirs in it, owned by uid and gid. The host can
// then reach the box's workspace at dir/workspace whatever the runtime.
func MountScratch(dir string, size, inodes int64, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := MountTmpfs(dir, "0755", size, inodes, uid, gid); err != nil {
		return err
	}
	for name := range ScratchDirs {
		p := filepath.Join(dir, name)
		mode := os.FileMode(0o755)
		if name == "tmp" || name == "shm" {
			mode = 0o777 | os.ModeSticky
		}
		if err := os.Mkdir(p, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// MountTmpfs mounts a tmpfs at dir of size bytes and inodes inodes (zero:
// the kernel's default), its root of mode (octal) owned by uid and gid,
// without set-id programs or device nodes.
func MountTmpfs(dir, mode string, size, inodes int64, uid, gid int) error {
	data := tmpfsData(mode, size, inodes, uid, gid)
	if err := unix.Mount("warden-scratch", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting tmpfs at %q: %w", dir, err)
	}
	return nil
}

// UnmountScratch detaches the tmpfs at dir and removes dir; the memory
// is freed once nothing holds a file there.
func UnmountScratch(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmounting %q: %w", dir, err)
	}
	return os.Remove(dir)
}

// OpenScratchWorkspace opens the workspace of the scratch tmpfs at dir as
// an O_PATH directory, the way the host reaches a box's files: without
// following a link the box may have put in its place.
func OpenScratchWorkspace(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "workspace"), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}
