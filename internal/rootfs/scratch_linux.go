package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

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
	if err := mountScratchTmpfs(dir, size, inodes, uid, gid); err != nil {
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

// shmemHugeKnob is the kernel's switch for transparent huge pages on
// tmpfs; it exists only where the kernel has them (a variable so that
// tests can point it at a file of their own).
var shmemHugeKnob = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

// ScratchHuge is the tmpfs mount option that backs a scratch's files with
// 2 MiB transparent huge pages ("huge=within_size"), or "" where the
// kernel has none or its administrator denied them. Writing a large file
// into huge pages costs the kernel a fraction of the page allocations and
// page-cache inserts of 4 KiB pages, which is most of what a snapshot's
// restore and a fork cost (docs/performance.md). within_size gives a file
// a huge page only where its size covers the whole 2 MiB, so small files
// keep small pages; the tmpfs size= bound counts every page, huge or not,
// so --disk bounds a box's bytes exactly as before; only a sparse file
// written here and there may take up to 2 MiB per region it touches and
// so fill the bound sooner (docs/sessions.md).
var ScratchHuge = sync.OnceValue(func() string { return hugeOption(shmemHugeKnob) })

// hugeOption reads the kernel's tmpfs huge page switch at knob and says
// which mount option a scratch takes.
func hugeOption(knob string) string {
	b, err := os.ReadFile(knob)
	if err != nil || strings.Contains(string(b), "[deny]") {
		return ""
	}
	return "huge=within_size"
}

// scratchTmpfsData is the mount data of a box's scratch tmpfs: its size
// and inode bounds, its owner, and huge pages where the kernel has them.
func scratchTmpfsData(size, inodes int64, uid, gid int) string {
	data := tmpfsData("0755", size, inodes, uid, gid)
	if huge := ScratchHuge(); huge != "" {
		data += "," + huge
	}
	return data
}

// mountScratchTmpfs mounts a scratch tmpfs at dir with the same mount
// data as native's own scratch (scratchTmpfsData), so both backends take
// huge pages or neither does: the switch exists only in a kernel built
// with tmpfs huge pages, which then takes the option.
func mountScratchTmpfs(dir string, size, inodes int64, uid, gid int) error {
	if err := unix.Mount("warden-scratch", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, scratchTmpfsData(size, inodes, uid, gid)); err != nil {
		return fmt.Errorf("mounting scratch tmpfs at %q: %w", dir, err)
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
