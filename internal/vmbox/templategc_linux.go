package vmbox

import "github.com/warden-sandbox/warden/internal/rootfs"

// UnusedTemplateRoots lists the shared roots in dir (StateDir, but in
// tests) of templates keep does not hold (keep gets "sha256:<hex>") that
// no box holds: what RemoveTemplateRoots would remove, for doctor.
func UnusedTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	return rootfs.UnusedImageTemplates(dir, keep, nil)
}

// RemoveTemplateRoots removes the shared roots UnusedTemplateRoots lists
// (rootfs.RemoveImageTemplates): `warden template gc` and `rm` call it
// under the store's lock. A box holds its root's lock from before its
// root binds it until that bind is gone (rootfs.HoldImageTemplate), so
// no root a box shows is removed. It returns the digests removed.
func RemoveTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	return rootfs.RemoveImageTemplates(dir, keep, nil)
}
