package vmbox

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// UnusedTemplateRoots lists the shared roots in dir (StateDir, but in
// tests) of templates keep does not hold (keep gets "sha256:<hex>") that
// no box's root binds: what RemoveTemplateRoots would remove, for doctor
// (which does not try the lock a box starting may hold yet).
func UnusedTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	used, err := boundRoots(dir)
	if err != nil {
		return nil, err
	}
	return rootfs.UnusedImageTemplates(dir, keep, used)
}

// RemoveTemplateRoots removes the shared roots UnusedTemplateRoots lists
// (rootfs.RemoveImageTemplates): `warden template gc` and `rm` call it
// under the store's lock. A box holds its root's lock from before its
// root binds it until that bind is gone (rootfs.HoldImageTemplate);
// besides, a root some box directory's root still binds is kept (a dead
// Warden's box, whose lock died with it, until the next Warden's sweep
// unmounts it). It returns the digests removed.
func RemoveTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	used, err := boundRoots(dir)
	if err != nil {
		return nil, err
	}
	return rootfs.RemoveImageTemplates(dir, keep, used)
}

// boundRoots is the set of shared roots in dir that a box's root
// (box-*/root, a bind of its root template) shows: the same directory,
// by device and inode, as the mount's root.
func boundRoots(dir string) (map[string]bool, error) {
	boxRoots, err := filepath.Glob(filepath.Join(dir, "box-*", "root"))
	if err != nil {
		return nil, err
	}
	type id struct{ dev, ino uint64 }
	bound := map[id]bool{}
	for _, p := range boxRoots {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err == nil {
			bound[id{st.Dev, st.Ino}] = true
		}
	}
	imgs, err := filepath.Glob(filepath.Join(dir, "img-*"))
	if err != nil {
		return nil, fmt.Errorf("listing the template roots in %q: %w", dir, err)
	}
	used := map[string]bool{}
	for _, p := range imgs {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err == nil && bound[id{st.Dev, st.Ino}] {
			used[p] = true
		}
	}
	return used, nil
}
