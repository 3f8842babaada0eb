package scratch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Seed copies into the fresh scratch at dir (made by rootfs.MountScratch
// or the init's own, its directories owned by the sandbox's user) the
// template's files at the places names picks of Kept in the root tree
// rootDir (home/sandbox, workspace), owned as the scratch's own
// directories are, so a session on a committed template finds what the
// committed one left there. Every backend calls it before the sandbox
// runs: gVisor, Docker and microvm on their host-side scratch, native in its init
// (or the Manager on a persistent workspace). The template is hostile
// input: links are copied as links, never followed; devices, fifos and
// sockets are skipped; set-id bits dropped; and the scratch's tmpfs bounds
// what is copied (its size and inodes: a template whose files do not fit
// fails with ErrNoSpace), and so do caps of their own, whatever the disk:
// MaxSeedEntries and MaxSeedBytes, counted before anything is copied
// (ErrSeedTooLarge), and MaxSeedTime (ErrSeedSlow). A template with none
// of those places costs one lookup each.
func Seed(dir, rootDir string, names []string) error {
	return seedWithin(dir, rootDir, names, MaxSeedTime)
}

// seedWithin is Seed, failing with ErrSeedSlow past within.
func seedWithin(dir, rootDir string, names []string, within time.Duration) (err error) {
	src, err := os.OpenRoot(rootDir)
	if err != nil {
		return fmt.Errorf("opening the template's root: %w", err)
	}
	defer closeRoot(src, "the template's root", &err)
	from, closeFrom, err := openKept(src, names, inRoot)
	if err != nil {
		return err
	}
	defer closeFrom()
	if len(from) == 0 {
		return nil
	}
	b := newBudget(within)
	if err := b.count(from); err != nil {
		return err
	}
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening the scratch: %w", err)
	}
	defer closeRoot(dst, "the scratch", &err)
	to, closeTo, err := openKept(dst, names, func(n string) string { return n })
	if err != nil {
		return err
	}
	defer closeTo()
	for name, r := range from {
		if to[name] == nil {
			continue
		}
		if err := seedTree(r, to[name], b); err != nil {
			return seedError(name, err)
		}
	}
	return nil
}

// seedError names the place a seed failed in and, when it ran out of
// room, the limit that stopped it and how to get past it.
func seedError(name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("copying the template's %s: %w (raise the disk limit, or commit fewer files)", rootfsPlace(name), ErrNoSpace)
	}
	return fmt.Errorf("copying the template's %s: %w", rootfsPlace(name), err)
}

// Seeds says the root tree rootDir has files Seed would copy (a
// non-empty home/sandbox or workspace), so a backend pays for what the
// copy needs (the native init's idmapped tree) only on a template that
// has them. An unreadable tree, or one whose place is a link, says true:
// Seed reports its error.
func Seeds(rootDir string) bool {
	src, err := os.OpenRoot(rootDir)
	if err != nil {
		return true
	}
	defer src.Close() // a read-only handle: nothing to lose on close
	for _, name := range Kept {
		if seeds, err := placeSeeds(src, inRoot(name)); seeds || err != nil {
			return true
		}
	}
	return false
}

// placeSeeds says the place p of the tree src is a real directory with
// something in it; a missing one has nothing, a linked one is an error.
func placeSeeds(src *os.Root, p string) (bool, error) {
	r, err := openPlace(src, p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close() // read-only: nothing to lose on close
	f, err := r.Open(".")
	if err != nil {
		return false, err
	}
	defer f.Close() // read-only, as above
	entries, err := f.ReadDir(1)
	if errors.Is(err, io.EOF) {
		return false, nil // empty
	}
	return len(entries) > 0, err
}

// closeRoot closes r, adding its failure to *err.
func closeRoot(r *os.Root, what string, err *error) {
	if cerr := r.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("closing %s: %w", what, cerr))
	}
}

func rootfsPlace(name string) string { return "/" + inRoot(name) }

// seedTree copies every entry of src into dst, owned as dst's top is.
// Past b's deadline it stops with ErrSeedSlow.
func seedTree(src, dst *os.Root, b *budget) error {
	top, err := dst.Stat(".")
	if err != nil {
		return err
	}
	st, ok := top.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.ErrUnsupported
	}
	uid, gid := int(st.Uid), int(st.Gid)
	return fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if err := b.charge(); err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := dst.Mkdir(p, fs.FileMode(perm(d))); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := src.Readlink(p)
			if err != nil {
				return err
			}
			if err := dst.Symlink(target, p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(src, dst, p, fs.FileMode(perm(d))); err != nil {
				return err
			}
		default:
			return nil
		}
		return dst.Lchown(p, uid, gid)
	})
}

func copyFile(src, dst *os.Root, p string, mode fs.FileMode) error {
	in, err := src.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close() // read-only: nothing to lose on close
	out, err := dst.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", path.Clean(p), err)
	}
	return nil
}

// SeedBox seeds the host-side scratch dir of a box on root (rootfs's
// MountScratch, before the box starts) from its template, naming the
// template in the error; a box on the host's root has nothing to seed.
func SeedBox(dir string, root spec.Root) error {
	if root.IsHost() {
		return nil
	}
	if err := Seed(dir, root.Dir, Kept); err != nil {
		return fmt.Errorf("template %q: %w", root.Template, err)
	}
	return nil
}
