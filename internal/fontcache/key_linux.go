package fontcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// keyFormat changes when the key's inputs or the way lists are built
// change, so that no list built the old way is used again.
const keyFormat = "warden-fontcache-1"

// siteDirs are where a root's python3 finds packages, from the root:
// Debian's, then those of each python3.X directory in libDirs.
var (
	siteDirs  = []string{"usr/lib/python3/dist-packages"}
	libDirs   = []string{"usr/lib", "usr/local/lib"}
	siteNames = []string{"dist-packages", "site-packages"}
)

// packageFiles identify a matplotlib package: the font list's code and
// format, and the version.
var packageFiles = []string{"font_manager.py", "_version.py"}

// fontTrees are the font directories fc-list reports, from the root (a
// missing one counts as missing): every directory in them is keyed by
// inode and mtime.
var fontTrees = []string{"usr/share/fonts", "usr/local/share/fonts"}

// mplFonts are matplotlib's own font directories (mpl-data/fonts in the
// package, or Debian's copy of mpl-data), which it scans itself; they
// hold files only, so each is keyed without a walk.
var mplFonts = []string{"fonts", "fonts/ttf", "fonts/afm", "fonts/pdfcorefonts"}

// debianMplData is where Debian keeps the package's mpl-data.
const debianMplData = "usr/share/matplotlib/mpl-data"

// configEntries are fontconfig's configuration: its directories (a
// package adds, removes or replaces a file by a rename, which changes its
// directory) and the two files an administrator edits in place.
var configEntries = []string{"etc/fonts", "etc/fonts/conf.d", "etc/fonts/conf.avail", "etc/fonts/fonts.conf", "etc/fonts/local.conf"}

// maxEntries bounds the entries one Key looks at, so that a root with a
// huge font tree costs a bounded walk on each run; past it, the key
// covers what it saw (and a font added deeper is found by matplotlib's
// own rebuild when a list names a font that is gone).
const maxEntries = 4096

// RootKey is the Key of the root tree at root ("/" for the host's): it
// stats matplotlib's packages, the font trees and fontconfig's
// configuration, and reads no file.
func RootKey(root string) (Key, error) {
	h := sha256.New()
	h.Write([]byte(keyFormat + "\x00"))
	buf := make([]byte, direntBuf) // one for every listing
	pkgs, err := packages(root, buf)
	if err != nil {
		return Key{}, err
	}
	if len(pkgs) == 0 {
		return Key{None: true}, nil
	}
	w := &walker{h: h, root: root, buf: buf}
	for _, p := range pkgs {
		for _, f := range packageFiles {
			w.entry(filepath.Join(p, f))
		}
		w.mplData(filepath.Join(p, "mpl-data"))
	}
	w.mplData(debianMplData)
	for _, t := range fontTrees {
		w.tree(t)
	}
	for _, e := range configEntries {
		w.entry(e)
	}
	if w.err != nil {
		return Key{}, w.err
	}
	return Key{Sum: hex.EncodeToString(h.Sum(nil))}, nil
}

// packages are the matplotlib packages in root's site directories, as
// paths from root, in a fixed order; buf is listDir's.
func packages(root string, buf []byte) ([]string, error) {
	dirs := slices.Clone(siteDirs)
	for _, lib := range libDirs {
		names, err := pythonDirs(filepath.Join(root, lib), buf)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			for _, site := range siteNames {
				dirs = append(dirs, filepath.Join(lib, n, site))
			}
		}
	}
	var out []string
	for _, d := range dirs {
		var st unix.Stat_t
		p := filepath.Join(d, "matplotlib")
		if unix.Lstat(filepath.Join(root, p, "font_manager.py"), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// pythonDirs are the python3.X names in dir (none when dir is missing);
// buf is listDir's.
func pythonDirs(dir string, buf []byte) ([]string, error) {
	entries, err := listDir(dir, buf)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.name, "python3.") {
			names = append(names, e.name)
		}
	}
	return names, nil
}

// walker hashes entries by path and identity, at most maxEntries.
type walker struct {
	h    hash.Hash
	root string
	seen int
	err  error
	// buf is listDir's buffer, one for the whole key.
	buf []byte
	// full says maxEntries was reached: the walk of the trees stops.
	full bool
}

// entry hashes rel's identity (lstat: a link is keyed as itself) or its
// absence.
func (w *walker) entry(rel string) {
	var st unix.Stat_t
	err := unix.Lstat(filepath.Join(w.root, rel), &st)
	w.add(rel, &st, err)
}

func (w *walker) add(rel string, st *unix.Stat_t, err error) {
	w.seen++
	var b [48]byte
	if err == nil {
		binary.LittleEndian.PutUint64(b[0:], st.Dev)
		binary.LittleEndian.PutUint64(b[8:], st.Ino)
		binary.LittleEndian.PutUint64(b[16:], uint64(st.Mode))
		binary.LittleEndian.PutUint64(b[24:], uint64(st.Size))
		binary.LittleEndian.PutUint64(b[32:], uint64(st.Mtim.Sec))
		binary.LittleEndian.PutUint64(b[40:], uint64(st.Mtim.Nsec))
	} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && w.err == nil {
		w.err = fmt.Errorf("looking at %q: %w", rel, err)
	}
	w.h.Write([]byte(rel + "\x00"))
	w.h.Write(b[:])
}

// mplData hashes matplotlib's font directories in the mpl-data
// directory rel.
func (w *walker) mplData(rel string) {
	for _, d := range mplFonts {
		w.entry(filepath.Join(rel, d))
	}
}

// tree hashes the directory rel and every directory below it (adding or
// removing a file changes its directory's mtime), in name order; it
// follows no link, and a rel that is no directory adds nothing. It
// hashes what filepath.WalkDir visiting each directory did (a listing's
// failure is added as the directory's second entry), with listDir's
// cheaper listing.
func (w *walker) tree(rel string) {
	if w.full || w.seen >= maxEntries {
		w.full = true
		return
	}
	var st unix.Stat_t
	p := filepath.Join(w.root, rel)
	if err := unix.Lstat(p, &st); err != nil {
		w.add(rel, nil, err)
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return
	}
	w.add(rel, &st, nil)
	entries, err := listDir(p, w.buf)
	if err != nil {
		if w.seen >= maxEntries {
			w.full = true
			return
		}
		w.add(rel, nil, err)
	}
	for _, e := range entries {
		if e.dir {
			w.tree(filepath.Join(rel, e.name))
		}
	}
}
