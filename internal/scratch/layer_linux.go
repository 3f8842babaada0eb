package scratch

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Layer writes, to w as an uncompressed tar in the image layer format,
// the files of the scratch at dir (a session's, made by
// rootfs.MountScratch) that Kept names, at their places in the sandbox's
// root (home/sandbox/..., workspace/...): directories, regular files and
// symlinks, with their permission bits; fifos, sockets and devices are
// left out. The sandbox may be changing the files meanwhile: a file is
// opened without blocking and taken only if it is still a regular file,
// and at most the size it had when opened is copied. Past maxBytes of
// file data, or MaxSeedBytes, or past MaxSeedEntries entries (what a
// template may seed: a larger one could never start), it stops with
// ErrTooLarge, so a commit never makes a template Seed refuses.
func Layer(w io.Writer, dir string, maxBytes int64) error {
	top, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening the session's scratch: %w", err)
	}
	defer top.Close()
	roots, closeAll, err := openKept(top, Kept, func(n string) string { return n })
	if err != nil {
		return err
	}
	defer closeAll()
	lw := &layerWriter{tw: tar.NewWriter(w), left: min(maxBytes, MaxSeedBytes), entries: MaxSeedEntries}
	for _, name := range Kept {
		if r := roots[name]; r != nil {
			if err := lw.tree(r, inRoot(name)); err != nil {
				return err
			}
		}
	}
	return lw.tw.Close()
}

type layerWriter struct {
	tw      *tar.Writer
	left    int64
	entries int
}

// tree adds every entry of r under prefix, parents first.
func (lw *layerWriter) tree(r *os.Root, prefix string) error {
	if err := lw.parents(prefix); err != nil {
		return err
	}
	return fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", path.Join(prefix, p), err)
		}
		name := path.Join(prefix, p)
		if p != "." {
			if lw.entries--; lw.entries < 0 {
				return fmt.Errorf("%w: more than %d entries, the most a template may seed, at %s (commit fewer files)", ErrTooLarge, MaxSeedEntries, name)
			}
		}
		switch {
		case d.IsDir():
			return lw.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: perm(d)})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := r.Readlink(p)
			if err != nil {
				return fmt.Errorf("reading link %s: %w", name, err)
			}
			return lw.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777})
		case d.Type().IsRegular():
			return lw.file(r, p, name)
		}
		return nil // a fifo, socket or device: not a file to keep
	})
}

// parents adds the directories above prefix (home/ for home/sandbox).
func (lw *layerWriter) parents(prefix string) error {
	dir := path.Dir(prefix)
	if dir == "." {
		return nil
	}
	if err := lw.parents(dir); err != nil {
		return err
	}
	return lw.header(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755})
}

func (lw *layerWriter) header(h *tar.Header) error {
	h.Format = tar.FormatPAX
	if err := lw.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("writing %s: %w", h.Name, err)
	}
	return nil
}

// file adds the regular file p of r as name, if it still is one.
func (lw *layerWriter) file(r *os.Root, p, name string) error {
	f, err := r.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", name, err)
	}
	defer f.Close() // read-only: nothing to lose on close
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil // replaced while walking: not a file to keep
	}
	if lw.left -= fi.Size(); lw.left < 0 {
		return fmt.Errorf("%w at %s", ErrTooLarge, name)
	}
	if err := lw.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(fi.Mode().Perm())}); err != nil {
		return err
	}
	if _, err := io.CopyN(lw.tw, f, fi.Size()); err != nil {
		return fmt.Errorf("copying %s (did the session change it meanwhile?): %w", name, err)
	}
	return nil
}

// perm is d's permission bits, 0755 if they cannot be read.
func perm(d fs.DirEntry) int64 {
	if fi, err := d.Info(); err == nil {
		return int64(fi.Mode().Perm())
	}
	return 0o755
}
