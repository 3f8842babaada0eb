package scratch

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Seed copies into the fresh scratch at dir (made by rootfs.MountScratch,
// its directories owned by the sandbox's user) the template's files at
// the places Kept names in the root tree rootDir (home/sandbox,
// workspace), owned as the scratch's own directories are, so a session
// on a committed template finds what the committed one left there. The
// scratch's tmpfs bounds what is copied (its size and inodes: a template
// whose files do not fit fails with ENOSPC). Links are copied as links,
// never followed; a template with none of those places costs one lookup
// each.
func Seed(dir, rootDir string) (err error) {
	src, err := os.OpenRoot(rootDir)
	if err != nil {
		return fmt.Errorf("opening the template's root: %w", err)
	}
	defer closeRoot(src, "the template's root", &err)
	from, closeFrom, err := openKept(src, Kept, inRoot)
	if err != nil {
		return err
	}
	defer closeFrom()
	if len(from) == 0 {
		return nil
	}
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening the scratch: %w", err)
	}
	defer closeRoot(dst, "the scratch", &err)
	to, closeTo, err := openKept(dst, Kept, func(n string) string { return n })
	if err != nil {
		return err
	}
	defer closeTo()
	for name, r := range from {
		if to[name] == nil {
			continue
		}
		if err := seedTree(r, to[name]); err != nil {
			return fmt.Errorf("seeding %s from the template: %w", rootfsPlace(name), err)
		}
	}
	return nil
}

// Seeds says the root tree rootDir has files Seed would copy (a
// non-empty home/sandbox or workspace), so a caller that cannot seed can
// say what the session misses. An unreadable tree says false: Seed would
// report its error.
func Seeds(rootDir string) bool {
	src, err := os.OpenRoot(rootDir)
	if err != nil {
		return false
	}
	defer src.Close() // a read-only handle: nothing to lose on close
	for _, name := range Kept {
		f, err := src.Open(inRoot(name)) // inside the tree: its links never reach the host's files
		if err != nil {
			continue
		}
		entries, _ := f.ReadDir(1) // any error is Seed's to report
		f.Close()                  // read-only, as above
		if len(entries) > 0 {
			return true
		}
	}
	return false
}

// closeRoot closes r, adding its failure to *err.
func closeRoot(r *os.Root, what string, err *error) {
	if cerr := r.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("closing %s: %w", what, cerr))
	}
}

func rootfsPlace(name string) string { return "/" + inRoot(name) }

// seedTree copies every entry of src into dst, owned as dst's top is.
func seedTree(src, dst *os.Root) error {
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
