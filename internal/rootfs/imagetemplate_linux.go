package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Caps on the image's /etc that SharedImageTemplate copies: real images
// hold well under a megabyte there, and the copy lives in memory (/run).
const (
	maxImageEtcBytes   = 16 << 20
	maxImageEtcEntries = 20000
)

// imageLayout changes whenever what SharedImageTemplate writes changes,
// so a Warden of another version writes its own.
const imageLayout = "2"

var digestHex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:([0-9a-f]{64})$`) })

// SharedImageTemplate is a Template for a template's tree (image, its
// spec.Root.Dir) that never writes to the tree, which every box on the
// template shares: runsc's gofer makes each missing mount point in the
// root's host directory, and the microvm backend binds the image's
// entries over mount points, so the root must be Warden's. Dir holds the
// image's top-level links as they are, an empty mount point for each of
// its other top-level directories and files (Binds, bound read-only from
// under From = image), Warden's own mount points (MountPoints), and a
// copy of the image's /etc with Warden's generated files over it. It is
// written once per image digest under base (img-<digest>-<layout>), as
// SharedTemplate writes the host's, and shared by every Warden.
func SharedImageTemplate(base, image, digest string) (Template, error) {
	m := digestHex().FindStringSubmatch(digest)
	if m == nil {
		return Template{}, fmt.Errorf("template digest %q is not sha256 and 64 hex digits: import or pull the template again", digest)
	}
	dir := filepath.Join(base, "img-"+m[1]+"-"+layoutSum())
	binds, err := imageBinds(image)
	if err != nil {
		return Template{}, err
	}
	t := Template{Dir: dir, Binds: binds, From: image, VarTmp: ImageVarTmp(image)}
	if _, err := os.Lstat(dir); err == nil {
		return t, nil
	}
	// A directory of this call's own: boxes start concurrently, on one
	// digest or several (boxname.StaleDirs sweeps a dead Warden's).
	tmp, err := os.MkdirTemp(base, fmt.Sprintf("tmp-%d-img-", os.Getpid()))
	if err != nil {
		return t, fmt.Errorf("writing the root of template %s: %w", digest, err)
	}
	if err := writeImageTemplate(tmp, image); err != nil {
		_ = os.RemoveAll(tmp) // the write's error is the one to report; boxname.StaleDirs sweeps tmp-<pid> later
		return t, fmt.Errorf("writing the root of template %s: %w", digest, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp) // another Warden renamed first (checked next); StaleDirs sweeps what stays
		if _, serr := os.Lstat(dir); serr != nil {
			return t, err
		}
	}
	return t, nil
}

// layoutSum names what SharedImageTemplate writes besides the image's
// own files.
func layoutSum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%q\x00%q\x00", imageLayout, MountPoints, ImageOwned, GeneratedEtc("sandbox"))
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// ImageVarTmp says the image at image has a /var/tmp directory, over
// which a runtime binds the sandbox's /tmp, as the native root does: on
// the host's root /var/tmp is /tmp, and programs that write there must
// work on a template too. An image without /var gets the host root's
// var/tmp -> ../tmp link (writeImageTemplate); one whose var/tmp is
// anything else keeps it.
func ImageVarTmp(image string) bool {
	fi, err := os.Lstat(filepath.Join(image, "var"))
	if err != nil || !fi.IsDir() {
		return false
	}
	fi, err = os.Lstat(filepath.Join(image, "var/tmp"))
	return err == nil && fi.IsDir()
}

// imageEntries are the image's top-level entries the box shows
// (ImageEntry).
func imageEntries(image string) ([]fs.DirEntry, error) {
	ents, err := os.ReadDir(image)
	if err != nil {
		return nil, fmt.Errorf("listing the template's root: %w", err)
	}
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool {
		return ImageEntry(e.Name(), e.Type()) == ImageSkipped
	}), nil
}

// imageBinds are the image's top-level directories and regular files,
// each bound read-only at its own path.
func imageBinds(image string) ([]string, error) {
	ents, err := imageEntries(image)
	if err != nil {
		return nil, err
	}
	var binds []string
	for _, e := range ents {
		if k := ImageEntry(e.Name(), e.Type()); k == ImageDir || k == ImageFile {
			binds = append(binds, "/"+e.Name())
		}
	}
	return binds, nil
}

// writeImageTemplate fills the empty directory dir for image.
func writeImageTemplate(dir, image string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	ents, err := imageEntries(image)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := imageMountPoint(filepath.Join(dir, e.Name()), filepath.Join(image, e.Name()), e); err != nil {
			return fmt.Errorf("/%s: %w", e.Name(), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "var")); errors.Is(err, fs.ErrNotExist) {
		if err := makeVar(dir); err != nil {
			return err
		}
	}
	for _, d := range MountPoints {
		if _, err := os.Lstat(filepath.Join(dir, d)); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	etc := filepath.Join(dir, "etc")
	if err := copyImageEtc(filepath.Join(image, "etc"), etc); err != nil {
		return fmt.Errorf("copying the image's /etc: %w", err)
	}
	for name, content := range GeneratedEtc("sandbox") {
		p := filepath.Join(etc, name)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return os.Chmod(etc, 0o755)
}

// imageMountPoint makes at dst what the root shows of the image's entry
// e: its link as it is, or an empty directory or file to bind it over.
// Both template roots use it: the native one's (bindImageEntry) and the
// shared one of gvisor and microvm (writeImageTemplate).
func imageMountPoint(dst, src string, e fs.DirEntry) error {
	switch ImageEntry(e.Name(), e.Type()) {
	case ImageLink:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case ImageDir:
		return os.Mkdir(dst, 0o755)
	case ImageFile:
		return os.WriteFile(dst, nil, 0o644)
	}
	return nil
}

// copyImageEtc copies the image's /etc (directories, files and links,
// with their modes: the store has made every entry root's, without
// set-id bits or group and world write) into dst, within the caps. An
// image without an /etc directory gets an empty one.
func copyImageEtc(src, dst string) error {
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return os.Mkdir(dst, 0o755)
	}
	var bytes, entries int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > maxImageEtcEntries {
			return fmt.Errorf("more than %d entries: the image's /etc is not a system configuration", maxImageEtcEntries)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(out, 0o700); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case d.Type().IsRegular():
			if bytes += fi.Size(); bytes > maxImageEtcBytes {
				return fmt.Errorf("more than %d MiB: the image's /etc is not a system configuration", maxImageEtcBytes>>20)
			}
			if err := copyRegular(p, out, fi.Size()); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Chmod(out, fi.Mode().Perm()|fi.Mode()&fs.ModeSticky)
	})
}

// copyRegular copies size bytes of the regular file src, opened without
// following a link, to a new file dst.
func copyRegular(src, dst string, size int64) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, in, size)
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%q shrank while copied", src)
	}
	return errors.Join(err, out.Close())
}
