package template

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// flattener builds a template's root from its layers' trees, lowest
// first: every regular file and symlink is a hard link to the layer's
// copy (no data copied, one page cache for every template sharing the
// layer), every directory a new directory, and whiteouts and opaque
// markers are applied, not copied. It writes only through an os.Root and
// replaces (never descends into) a lower layer's non-directory.
type flattener struct {
	ctx     context.Context
	root    *os.Root
	modes   map[string]fs.FileMode // directories' modes, applied last
	dst     string
	dirName string   // the directory parent is open on, for link
	parent  *os.File // the last parent link used, kept open across its files
}

// flatten makes dst (an existing empty directory) the union of layers,
// stopping when ctx ends. Directories are made 0700 and given their
// layers' modes only once every layer is in (see applyModes).
func flatten(ctx context.Context, dst string, layers []string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening %q: %w", dst, err)
	}
	defer root.Close()
	f := &flattener{ctx: ctx, root: root, dst: dst, modes: map[string]fs.FileMode{}}
	defer f.closeDir()
	for _, l := range layers {
		if err := filepath.WalkDir(l, f.visit(l)); err != nil {
			return fmt.Errorf("flattening layer %q: %w", filepath.Base(filepath.Dir(l)), err)
		}
	}
	f.closeDir()
	return applyModes(root, f.modes)
}

// closeDir closes the parent directory link keeps open.
func (f *flattener) closeDir() {
	if f.parent != nil {
		f.parent.Close()
		f.parent, f.dirName = nil, ""
	}
}

// visit returns the WalkDir callback for the layer tree at top.
func (f *flattener) visit(top string) fs.WalkDirFunc {
	return func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := f.ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(top, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := path.Base(rel)
		switch {
		case rel == ".":
			return f.hide(p, ".")
		case strings.HasPrefix(base, whiteoutPrefix):
			return nil // applied by hide, on entering the directory
		case d.IsDir():
			return f.dir(p, rel)
		default:
			return f.link(p, rel)
		}
	}
}

// dir makes rel a directory with the layer's mode, replacing a lower
// non-directory, and applies the whiteouts and opaque marker in it.
func (f *flattener) dir(src, rel string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	cur, err := f.root.Lstat(rel)
	switch {
	case err == nil && cur.IsDir():
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err := f.remove(rel); err != nil {
			return err
		}
		if err := f.root.Mkdir(rel, 0o700); err != nil {
			return err
		}
	default:
		return err
	}
	f.modes[rel] = fi.Mode() & (fs.ModePerm | fs.ModeSticky)
	return f.hide(src, rel)
}

// whiteout removes the name the whiteout rel hides. Unpacking refuses a
// whiteout hiding "." or "..", so one here means a corrupt store.
func (f *flattener) whiteout(rel string) error {
	hidden := strings.TrimPrefix(path.Base(rel), whiteoutPrefix)
	if hidden == "" || hidden == "." || hidden == ".." {
		return fmt.Errorf("whiteout %q names no entry of its directory: the stored layer is corrupt (remove it with warden template gc)", rel)
	}
	return f.remove(path.Join(path.Dir(rel), hidden))
}

// hide removes from rel what the layer's directory src hides of lower
// layers: everything, if it holds the opaque marker, else each name a
// whiteout in it names. It runs on entering the directory, before any of
// the layer's own entries in it: a whiteout hides lower layers only, and
// a walk in name order would meet ".a" (or "-a") before ".wh..a", then
// delete the layer's own new ".a" (a directory replaced by a symlink at
// the same name, as real images do).
func (f *flattener) hide(src, rel string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == opaqueMarker {
			return f.opaque(rel)
		}
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), whiteoutPrefix) {
			if err := f.whiteout(path.Join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// opaque empties rel of what lower layers put there.
func (f *flattener) opaque(rel string) error {
	ents, err := fs.ReadDir(f.root.FS(), rel)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := f.remove(path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes rel and everything under it, if it exists.
func (f *flattener) remove(rel string) error {
	f.closeDir() // it may be under rel
	err := f.root.RemoveAll(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
