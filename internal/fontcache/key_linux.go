package fontcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// keyFormat changes when the key's inputs or the way lists are built
// change, so that no list built the old way is used again.
const keyFormat = "warden-fontcache-1"

// siteDirs are where a root's python3 finds packages (a glob each, from
// the root): Debian's, then pip's under /usr/local.
var siteDirs = []string{
	"usr/lib/python3/dist-packages",
	"usr/lib/python3.*/site-packages",
	"usr/local/lib/python3.*/dist-packages",
	"usr/local/lib/python3.*/site-packages",
}

// packageFiles identify a matplotlib package: the font list's code and
// format, and the version.
var packageFiles = []string{"font_manager.py", "_version.py"}

// fontTrees are the font directories matplotlib scans or fc-list
// reports, from the root (a missing one counts as missing): their
// directories are keyed by inode and mtime.
var fontTrees = []string{"usr/share/fonts", "usr/local/share/fonts", "usr/share/matplotlib/mpl-data/fonts"}

// configTree is fontconfig's configuration: its directories, and the two
// files an administrator edits (a package replaces a file by a rename,
// which changes its directory; an edit in place changes only the file).
const configTree = "etc/fonts"

var configFiles = []string{"etc/fonts/fonts.conf", "etc/fonts/local.conf"}

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
	pkgs, err := packages(root)
	if err != nil {
		return Key{}, err
	}
	if len(pkgs) == 0 {
		return Key{None: true}, nil
	}
	w := &walker{h: h, root: root}
	for _, p := range pkgs {
		for _, f := range packageFiles {
			w.entry(filepath.Join(p, f))
		}
		w.tree(filepath.Join(p, "mpl-data", "fonts"))
	}
	for _, t := range fontTrees {
		w.tree(t)
	}
	w.tree(configTree)
	for _, f := range configFiles {
		w.entry(f)
	}
	if w.err != nil {
		return Key{}, w.err
	}
	return Key{Sum: hex.EncodeToString(h.Sum(nil))}, nil
}

// packages are the matplotlib packages in root's site directories, as
// paths from root, in a fixed order.
func packages(root string) ([]string, error) {
	var out []string
	for _, pattern := range siteDirs {
		dirs, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", pattern, err)
		}
		for _, d := range dirs {
			var st unix.Stat_t
			p := filepath.Join(d, "matplotlib", "font_manager.py")
			if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				rel, _ := filepath.Rel(root, filepath.Join(d, "matplotlib"))
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// walker hashes entries by path and identity, at most maxEntries.
type walker struct {
	h    hash.Hash
	root string
	seen int
	err  error
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

// tree hashes the directory rel and every directory below it (adding or
// removing a file changes its directory's mtime); it follows no link.
func (w *walker) tree(rel string) {
	err := filepath.WalkDir(filepath.Join(w.root, rel), func(p string, d fs.DirEntry, err error) error {
		if w.seen >= maxEntries {
			return filepath.SkipAll
		}
		r, _ := filepath.Rel(w.root, p)
		if err != nil {
			w.add(r, nil, err)
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		w.entry(r)
		return nil
	})
	if err != nil && w.err == nil {
		w.err = err
	}
}
