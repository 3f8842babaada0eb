package template

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// whiteoutPrefix marks an entry that hides a lower layer's name, and
// opaqueMarker a directory that hides everything lower layers put in it
// (the OCI image spec's whiteouts). A layer's tree keeps them as empty
// files; flattening applies them.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// HidesFirst orders the entries of one directory of a layer's tree as
// they must be applied: its opaque marker, then its other whiteouts, then
// the rest, each group in name order. A whiteout hides lower layers only,
// so an applier meeting ".a" (or "-a") before ".wh..a", as name order
// does, would hide the layer's own new ".a": Docker's overlay2 applier
// fails the load instead (mknod of the whiteout over the new entry).
func HidesFirst(ents []fs.DirEntry) []fs.DirEntry {
	rank := func(name string) int {
		switch {
		case name == opaqueMarker:
			return 0
		case strings.HasPrefix(name, whiteoutPrefix):
			return 1
		}
		return 2
	}
	out := slices.Clone(ents)
	slices.SortStableFunc(out, func(a, b fs.DirEntry) int {
		if c := rank(a.Name()) - rank(b.Name()); c != 0 {
			return c
		}
		return strings.Compare(a.Name(), b.Name())
	})
	return out
}

// maxName is PATH_MAX: a longer name cannot be a real file, and would
// cost a walk per component on each of its many parents.
const maxName = 4096

// budget is what one pull may still unpack: a decompression bomb or a
// flood of tiny entries stops at the cap with an error, not a full disk.
type budget struct {
	bytes   int64
	entries int64
}

// take charges n bytes and one entry, failing once either runs out.
func (b *budget) take(n int64) error {
	b.entries--
	if b.entries < 0 {
		return errors.New("more entries than the per-pull cap (raise --max-entries)")
	}
	if n > b.bytes {
		return errors.New("unpacks to more bytes than the per-pull cap (raise --max-size)")
	}
	b.bytes -= n
	return nil
}

// unpacker writes one layer's tar stream into its own fresh directory,
// treating every header as hostile: it writes only through an os.Root
// (no path can resolve outside it), refuses names that climb out or are
// absolute, never writes through a symlink the layer made, links only to
// regular files the layer already wrote, drops device nodes and fifos,
// strips set-id bits and group/world write, and charges the budget.
type unpacker struct {
	root     *os.Root
	layer    string // digest, for errors
	budget   *budget
	symlinks map[string]bool        // names this layer made symlinks
	modes    map[string]fs.FileMode // directories' modes, applied last (see applyModes)
	warn     func(msg string, args ...any)
}

// unpackLayer unpacks the tar stream r into dir (which must exist and be
// empty), naming layer in every error.
func unpackLayer(r io.Reader, dir, layer string, b *budget, warn func(string, ...any)) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening %q: %w", dir, err)
	}
	defer root.Close()
	u := &unpacker{root: root, layer: layer, budget: b, symlinks: map[string]bool{}, modes: map[string]fs.FileMode{}, warn: warn}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if err := applyModes(root, u.modes); err != nil {
				return fmt.Errorf("layer %s: setting directory modes: %w", layer, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("layer %s: reading the tar stream: %w", layer, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return fmt.Errorf("layer %s: entry %q: %w", layer, hdr.Name, err)
		}
	}
}

// cleanName turns a tar name into a relative slash path with no ".."
// component, or refuses it; "" is the layer's root itself.
func cleanName(name string) (string, error) {
	if len(name) > maxName {
		return "", fmt.Errorf("path longer than %d bytes", maxName)
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute path: entries must be relative to the layer's root")
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", errors.New(`".." in the path would escape the layer's root`)
		}
		if strings.ContainsRune(c, 0) {
			return "", errors.New("NUL byte in the path")
		}
	}
	p := path.Clean(name)
	if p == "." {
		return "", nil
	}
	return p, nil
}

// entry writes one header.
func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	size := int64(0)
	if hdr.Typeflag == tar.TypeReg {
		size = hdr.Size
	}
	if err := u.budget.take(size); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader || name == "" {
		return nil
	}
	if err := u.checkParents(name); err != nil {
		return err
	}
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		return u.whiteout(name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(name, hdr.FileInfo().Mode())
	case tar.TypeReg: // tar.Reader turns the legacy TypeRegA into TypeReg or TypeDir
		return u.file(name, hdr.FileInfo().Mode(), body, hdr.Size)
	case tar.TypeSymlink:
		return u.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return u.hardlink(name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.warn("dropped a device node or fifo from a layer: templates hold none", "layer", u.layer, "entry", name)
		return nil
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
}

// safeMode keeps an entry's permission bits minus set-uid, set-gid and
// group/world write, and a directory's sticky bit. A directory always
// keeps owner read and search: root ignores those bits anyway, and a
// store not run as root could not flatten or remove a layer without them.
func safeMode(m fs.FileMode) fs.FileMode {
	out := m.Perm() &^ 0o022
	if m.IsDir() {
		out |= 0o500
		if m&fs.ModeSticky != 0 {
			out |= fs.ModeSticky
		}
	}
	return out
}

// checkParents refuses a name below a symlink this layer made: writing
// there would follow the link.
func (u *unpacker) checkParents(name string) error {
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if u.symlinks[d] {
			return fmt.Errorf("path goes through the symlink %q: writes never follow links", d)
		}
	}
	return u.mkdirAll(path.Dir(name))
}

// mkdirAll makes the missing parents of an entry, 0755 as tar tools do.
func (u *unpacker) mkdirAll(dir string) error {
	if dir == "." {
		return nil
	}
	if fi, err := u.root.Lstat(dir); err == nil {
		if fi.IsDir() {
			return nil
		}
		return fmt.Errorf("parent %q is not a directory", dir)
	}
	if err := u.mkdirAll(path.Dir(dir)); err != nil {
		return err
	}
	return u.root.Mkdir(dir, 0o755)
}

// clear removes what a later entry of the same name replaces, keeping a
// directory when the new entry is one too.
func (u *unpacker) clear(name string, keepDir bool) (exists bool, err error) {
	fi, err := u.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if keepDir && fi.IsDir() {
		return true, nil
	}
	delete(u.symlinks, name)
	return false, u.root.RemoveAll(name)
}

func (u *unpacker) dir(name string, mode fs.FileMode) error {
	exists, err := u.clear(name, true)
	if err != nil {
		return err
	}
	if !exists {
		if err := u.root.Mkdir(name, 0o700); err != nil {
			return err
		}
	}
	u.modes[name] = safeMode(mode)
	return nil
}

func (u *unpacker) file(name string, mode fs.FileMode, body io.Reader, size int64) error {
	if _, err := u.clear(name, false); err != nil {
		return err
	}
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(body, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("short body: %d of %d bytes", n, size)
	}
	if err != nil {
		return err
	}
	return u.root.Chmod(name, safeMode(mode))
}

func (u *unpacker) symlink(name, target string) error {
	if _, err := u.clear(name, false); err != nil {
		return err
	}
	if err := u.root.Symlink(target, name); err != nil {
		return err
	}
	u.symlinks[name] = true
	return nil
}

// hardlink links name to a regular file this layer already wrote: a
// link to a lower layer, to a later entry or out of the root is refused.
func (u *unpacker) hardlink(name, target string) error {
	t, err := cleanName(target)
	if err != nil || t == "" {
		return fmt.Errorf("hard link target %q: must be a relative path inside the layer", target)
	}
	if err := u.checkParents(t); err != nil {
		return fmt.Errorf("hard link target %q: %w", target, err)
	}
	fi, err := u.root.Lstat(t)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("hard link target %q is not a regular file written earlier in this layer", target)
	}
	if t == name {
		return nil
	}
	if _, err := u.clear(name, false); err != nil {
		return err
	}
	return u.root.Link(t, name)
}

// whiteout keeps a whiteout or opaque marker as an empty file, refusing a
// whiteout that names nothing.
func (u *unpacker) whiteout(name string) error {
	base := path.Base(name)
	hidden := strings.TrimPrefix(base, whiteoutPrefix)
	if base != opaqueMarker {
		if strings.HasPrefix(hidden, whiteoutPrefix) {
			return nil // other AUFS metadata (.wh..wh.plnk and the like)
		}
		if hidden == "" || hidden == "." || hidden == ".." {
			return fmt.Errorf("whiteout names nothing: %q is no entry of its directory (a whiteout must name a file or directory)", hidden)
		}
	}
	if _, err := u.clear(name, false); err != nil {
		return err
	}
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0)
	if err != nil {
		return err
	}
	return f.Close()
}
