package native

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/scratch"
)

// openRoot opens the template's root tree a sandbox runs on
// (spec.Root.Dir), if it has one. As root it is a detached, read-only
// mount of the tree (open_tree): the store is 0700 root's, which the
// sandbox's mapped user cannot enter by path, and the mount is the very
// tree the host checked. Rootless, the store is the invoking user's own,
// and the init opens the path again (see nsinit's reopenRoot).
func (b *box) openRoot() error {
	dir := b.spec.Root.Dir
	if dir == "" {
		return nil
	}
	fd, err := nsinit.OpenWorkspace(dir)
	if err != nil {
		return rootError(b.spec.Root.Template, dir, err)
	}
	if b.ids.rootless {
		b.child.root = os.NewFile(uintptr(fd), dir)
		return nil
	}
	defer closeFD(fd, "the template's root")
	mnt, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning the mount of template %q's root %q: %w", b.spec.Root.Template, dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		closeFD(mnt, "the template's root mount")
		return fmt.Errorf("making template %q's root read-only: %w", b.spec.Root.Template, err)
	}
	b.child.root, b.child.rootIsMount = os.NewFile(uintptr(mnt), dir), true
	return b.openSeed(fd)
}

// openSeed gives the init, as root, the template's tree to copy its home
// and /workspace from (nsinit.SeedFD): a detached, read-only, noexec
// mount of it, idmapped so the files (root's on the host) are the
// sandbox user's, which through the sandbox's own user namespace are
// nobody's and an owner-only one unreadable. The init attaches it in
// the scratch only while it copies, so the sandbox never sees it. Only
// for a template with something to copy (scratch.Seeds), and not when
// the host seeded the scratch (spec.Scratch); a file system that cannot
// be idmapped leaves the init the plain tree.
func (b *box) openSeed(fd int) error {
	if b.spec.Scratch != "" || !scratch.Seeds(b.spec.Root.Dir) {
		return nil
	}
	userns, err := mappingNamespace(0, b.ids.uid, 0, b.ids.gid)
	if err != nil {
		return fmt.Errorf("creating the id mapping of template %q's home: %w", b.spec.Root.Template, err)
	}
	defer userns.Close() // the mount keeps its own reference
	mnt, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning the mount of template %q's root: %w", b.spec.Root.Template, err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_IDMAP,
		Userns_fd: uint64(userns.Fd()),
	}
	err = unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		closeFD(mnt, "the template's seed mount")
		b.log().Warn("the template's store cannot be idmapped: its home is copied from the plain tree, where an owner-only file fails the start with permission denied; put the state directory on a file system that supports idmapped mounts (ext4, xfs, btrfs, tmpfs)", "template", b.spec.Root.Template, "err", err)
		return nil
	}
	if err != nil {
		closeFD(mnt, "the template's seed mount")
		return fmt.Errorf("idmapping template %q's root: %w", b.spec.Root.Template, err)
	}
	b.child.seed = os.NewFile(uintptr(mnt), b.spec.Root.Dir)
	return nil
}

// rootError explains why the template's root could not be opened.
func rootError(name, dir string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("template %q's root %q is gone: the template was removed; see warden template ls", name, dir)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("template %q's root %q is not a directory reached without symbolic links: pull or import the template again", name, dir)
	}
	return fmt.Errorf("opening template %q's root %q: %w", name, dir, err)
}

// closeFD closes fd, logging a failure (what names it).
func closeFD(fd int, what string) {
	if err := unix.Close(fd); err != nil {
		slog.Warn("closing "+what, "err", err)
	}
}
