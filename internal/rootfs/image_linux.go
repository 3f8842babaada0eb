package rootfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Where a template's root and Warden's generated /etc files sit while
// the sandbox root is assembled: in the scratch tmpfs, outside every
// directory of it the sandbox sees, so that detaching the scratch before
// pivot_root (buildDev) takes the image's mount along, with no unmount
// of its own (each costs an RCU grace period). The overlay at /etc keeps
// private references to both.
const (
	imageDir  = ".image"
	etcGenDir = ".etc"
)

// mountImage attaches the template's root at dir.
func mountImage(img *ImageRoot, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if img.IsMount {
		if err := unix.MoveMount(img.FD, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("moving the template's root to %q: %w", dir, err)
		}
		return nil
	}
	return mount("/proc/self/fd/"+strconv.Itoa(img.FD), dir, "", unix.MS_BIND|unix.MS_REC, "")
}

// bindImage builds the sandbox root from a template's: each top-level
// entry ImageEntry keeps is bound read-only (or recreated, for a link),
// and /etc is the image's with Warden's generated files over it. Nothing
// is created in the template's tree, which every sandbox on it shares:
// mount points the image lacks are made in the root tmpfs. It runs after
// buildScratch, whose tmpfs holds the image's mount while it is used.
func bindImage(root string, o Options) error {
	if o.Image == nil {
		return nil
	}
	img := filepath.Join(root, scratchDir, imageDir)
	if err := mountImage(o.Image, img); err != nil {
		return err
	}
	ents, err := os.ReadDir(img)
	if err != nil {
		return fmt.Errorf("listing the template's root: %w", err)
	}
	hasVar := false
	for _, e := range ents {
		hasVar = hasVar || (e.Name() == "var" && e.IsDir())
		if err := bindImageEntry(img, root, e); err != nil {
			return fmt.Errorf("/%s: %w", e.Name(), err)
		}
	}
	if err := imageVarTmp(root, hasVar); err != nil {
		return err
	}
	return imageEtc(root, img, o.Hostname)
}

// imageVarTmp makes /var/tmp the sandbox's /tmp, as on the host's root:
// over the image's own directory when it has one (a bind on the
// read-only /var, which the tree never sees), or as makeVar's link in an
// image without /var. An image whose var/tmp is anything else keeps it.
func imageVarTmp(root string, hasVar bool) error {
	if !hasVar {
		return makeVar(root)
	}
	varTmp := filepath.Join(root, "var/tmp")
	var st unix.Stat_t
	if unix.Lstat(varTmp, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	return mount(filepath.Join(root, "tmp"), varTmp, "", unix.MS_BIND, "")
}

// bindImageEntry shows the image's top-level entry e at root.
func bindImageEntry(img, root string, e fs.DirEntry) error {
	src, dst := filepath.Join(img, e.Name()), filepath.Join(root, e.Name())
	switch ImageEntry(e.Name(), e.Type()) {
	case ImageLink:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case ImageDir:
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if emptyDir(src) {
			return nil // the root tmpfs's own empty directory shows the same
		}
		return bindRO(src, dst, false)
	case ImageFile:
		if err := touch(dst); err != nil {
			return err
		}
		return bindRO(src, dst, false)
	}
	return nil
}

// emptyDir says the directory at p has no entries: an image's empty
// /mnt, /srv or /media needs no mount, which costs more than the read
// (a bind and a mount_setattr, each under the kernel's namespace lock).
func emptyDir(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// makeVar gives an image without /var the host root's: an empty
// directory whose tmp is the sandbox's /tmp.
func makeVar(root string) error {
	if err := os.Mkdir(filepath.Join(root, "var"), 0o755); err != nil {
		return err
	}
	return os.Symlink("../tmp", filepath.Join(root, "var/tmp"))
}

// imageEtc mounts /etc as a read-only overlay of Warden's GeneratedEtc
// over the image's /etc: the image's files as it has them, but the
// users, groups, host names and resolver Warden says, whether or not the
// image has files of those names (an OCI image usually has no hosts or
// resolv.conf, and the template's tree may not be written). An image
// with no /etc at all gets the generated files alone.
func imageEtc(root, img, hostname string) error {
	gen := filepath.Join(root, scratchDir, etcGenDir)
	if err := os.Mkdir(gen, 0o755); err != nil {
		return err
	}
	for name, content := range GeneratedEtc(hostname) {
		if err := os.WriteFile(filepath.Join(gen, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	etc := filepath.Join(root, "etc")
	var st unix.Stat_t
	err := unix.Stat(filepath.Join(img, "etc"), &st)
	switch {
	case errors.Is(err, unix.ENOENT) || err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return bindRO(gen, etc, false)
	case err != nil:
		return err
	}
	opts := "lowerdir=" + gen + ":" + filepath.Join(img, "etc")
	return mount("overlay", etc, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts)
}
