package vmbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// roAttrs are the attributes of every mount in a box's root, set on the
// whole tree at once (AT_RECURSIVE, so a mount nested in a bound host
// directory gets them too): read-only, no set-id programs, no devices.
const roAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

// assembleRoot makes the box's root at dir on the host, as the gVisor
// bundle's mounts make it: the template's directory, and each of its
// binds (the host's /usr and the /etc files it shares) from the same path
// under its From, all read-only. The VM gets dir as one 9p share (which
// remaps the inode numbers of the mounts it spans): one device for the
// whole root, whatever the template binds, and nothing of the host the
// box would not see. The tree is private before anything is bound into
// it: on a host whose mounts are shared (systemd's default) a bind into
// a bind of the template would otherwise appear in the template itself
// and every peer of /run, and outlive the box there.
func assembleRoot(tmpl rootfs.Template, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := bind(tmpl.Dir, unix.AT_FDCWD, dir); err != nil {
		return err
	}
	if err := setattr(dir, &unix.MountAttr{Propagation: unix.MS_PRIVATE}); err != nil {
		return err
	}
	if err := bindAll(tmpl, dir); err != nil {
		return err
	}
	return setattr(dir, &unix.MountAttr{Attr_set: roAttrs, Propagation: unix.MS_PRIVATE})
}

// bindAll binds each of tmpl's Binds onto its mount point in the root at
// dir. The mount points are resolved beneath the root without following
// any link and without leaving its mount: the root is shared (one per
// image digest, written by whichever tree came first), so a link there
// must never make the host mount a tree over a path of its own.
func bindAll(tmpl rootfs.Template, dir string) error {
	root, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range tmpl.Binds {
		rel := strings.TrimPrefix(filepath.Clean("/"+p), "/")
		if err := bind(filepath.Join("/", tmpl.From, p), int(root.Fd()), rel); err != nil {
			return fmt.Errorf("the template root %q: %w", tmpl.Dir, err)
		}
	}
	return nil
}

// bind binds src, not following a link there, at dst (resolved beneath
// dirfd, or at an absolute dst if dirfd is AT_FDCWD) with the mounts
// below src (the share spans them; QEMU's remap keeps their inode
// numbers apart). The mount point must be a directory or regular file,
// as src is: a root whose mount point differs from the tree's entry is
// not this tree's and is refused.
func bind(src string, dirfd int, dst string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("binding %q: %w", src, err)
	}
	defer unix.Close(tree)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW}
	if dirfd != unix.AT_FDCWD {
		how.Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV
	}
	at, err := unix.Openat2(dirfd, dst, &how)
	if err != nil {
		return fmt.Errorf("mount point %q, opened following no link: %w: %w", dst, err, errForeignRoot)
	}
	defer unix.Close(at)
	if err := sameKind(tree, at); err != nil {
		return fmt.Errorf("mount point %q: %w: %w", dst, err, errForeignRoot)
	}
	if err := unix.MoveMount(tree, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("binding %q at %q: %w", src, dst, err)
	}
	return nil
}

// errForeignRoot says a shared root's mount point is not the tree's
// entry, and how to get a root written for the tree.
var errForeignRoot = errors.New("the root was written for another tree with the same digest (remove the templates of that digest, run warden template gc, import again)")

// sameKind refuses a mount point that is not a directory or regular file
// like the tree bound onto it.
func sameKind(tree, at int) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(tree, &a); err != nil {
		return err
	}
	if err := unix.Fstat(at, &b); err != nil {
		return err
	}
	kind := a.Mode & unix.S_IFMT
	if (kind != unix.S_IFDIR && kind != unix.S_IFREG) || b.Mode&unix.S_IFMT != kind {
		return fmt.Errorf("file type %#o where the tree has %#o", b.Mode&unix.S_IFMT, kind)
	}
	return nil
}

// setattr sets attr on the mount at dir and every mount below it.
func setattr(dir string, attr *unix.MountAttr) error {
	if err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, attr); err != nil {
		return fmt.Errorf("setting the attributes of the mounts at %q: %w", dir, err)
	}
	return nil
}

// unmountRoot detaches the box's root and every bind in it, then removes
// its directory: only then may the box's directory be removed, which
// must never reach through a bind.
func unmountRoot(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // the box ended before its root was made
	case err != nil && !errors.Is(err, unix.EINVAL):
		return fmt.Errorf("unmounting %q: %w", dir, err)
	}
	return os.Remove(dir)
}
