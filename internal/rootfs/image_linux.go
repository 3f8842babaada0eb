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

// Where a template's root (and the idmapped copy of it Seed reads) and
// Warden's generated /etc files sit while the sandbox root is assembled:
// in the scratch tmpfs, outside every directory of it the sandbox sees,
// so that detaching the scratch before pivot_root (buildDev) takes the
// image's mount along, with no unmount of its own (each costs an RCU
// grace period). The overlay at /etc keeps private references to both.
const (
	imageDir  = ".image"
	seedDir   = ".seed"
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
	for _, e := range ents {
		if err := bindImageEntry(img, root, e); err != nil {
			return fmt.Errorf("/%s: %w", e.Name(), err)
		}
	}
	if err := imageVarTmp(root, img); err != nil {
		return err
	}
	return imageEtc(root, img, o.Hostname)
}

// seedImage copies the template's home and /workspace into the scratch
// (Options.Seed) while the tree is still attached in it, before the
// scratch is detached and the sandbox runs.
func seedImage(root string, o Options) error {
	if o.Seed == nil || o.HostScratch {
		return nil
	}
	scratch := filepath.Join(root, scratchDir)
	tree := filepath.Join(scratch, imageDir)
	if o.SeedFrom != nil {
		// Detached with the scratch, before the sandbox runs.
		tree = filepath.Join(scratch, seedDir)
		if err := mountImage(o.SeedFrom, tree); err != nil {
			return err
		}
	}
	return o.Seed(scratch, tree, o.WorkspaceFD < 0)
}

// imageVarTmp makes /var/tmp the sandbox's /tmp, as on the host's root:
// over the image's own directory when ImageVarTmp says so (a bind on the
// read-only /var, which the tree never sees), or as makeVar's link in an
// image whose root shows no /var. An image whose var is a link or a file,
// or whose var/tmp is anything but a directory, keeps it: a link would
// resolve in the host's tree here, before pivot_root. The gvisor and
// docker roots take the same decision (writeImageTemplate and docker's
// binds, through ImageVarTmp).
func imageVarTmp(root, img string) error {
	if _, err := os.Lstat(filepath.Join(root, "var")); errors.Is(err, fs.ErrNotExist) {
		return makeVar(root)
	}
	if !ImageVarTmp(img) {
		return nil
	}
	return mount(filepath.Join(root, "tmp"), filepath.Join(root, "var/tmp"), "", unix.MS_BIND, "")
}

// bindImageEntry shows the image's top-level entry e at root: the mount
// point imageMountPoint makes (or the link it recreates), with the
// image's entry bound read-only over it.
func bindImageEntry(img, root string, e fs.DirEntry) error {
	src, dst := filepath.Join(img, e.Name()), filepath.Join(root, e.Name())
	if err := imageMountPoint(dst, src, e); err != nil {
		return err
	}
	switch ImageEntry(e.Name(), e.Type()) {
	case ImageDir:
		if emptyDir(src) {
			return nil // the root tmpfs's own empty directory shows the same
		}
		return bindRO(src, dst, false)
	case ImageFile:
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
// whose /etc is not a directory of its own (absent, a file, or a link,
// which would resolve in the host's tree here, before pivot_root) gets
// the generated files alone.
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
	lower, err := openImageEtc(img)
	if err != nil {
		return err
	}
	if lower < 0 {
		return bindRO(gen, etc, false)
	}
	defer closeFD(lower, "the image's /etc")
	opts := "lowerdir=" + gen + ":/proc/self/fd/" + strconv.Itoa(lower)
	return mount("overlay", etc, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// openImageEtc opens the image's etc beneath its root without following
// a link, so the overlay's lower layer is that directory and nothing a
// name could be made to point at: a descriptor (O_PATH) of it, or -1
// when the image has no etc directory of its own.
func openImageEtc(img string) (int, error) {
	dir, err := unix.Open(img, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the template's root: %w", err)
	}
	defer closeFD(dir, "the template's root")
	fd, err := unix.Openat(dir, "etc", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("opening the template's /etc: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		closeFD(fd, "the template's /etc")
		return -1, fmt.Errorf("checking the template's /etc: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		closeFD(fd, "the template's /etc")
		return -1, nil
	}
	return fd, nil
}
