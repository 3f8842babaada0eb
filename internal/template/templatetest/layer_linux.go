package templatetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// skipContents lists the directories (relative to the root) whose contents
// never go into a layer: apt's package lists and downloaded archives, which
// the build leaves behind and an image does not need (the directories
// themselves stay, empty).
var skipContents = []string{"var/lib/apt/lists", "var/cache/apt", "tmp", "proc", "sys", "dev", "run"}

// skipped reports whether rel lies inside one of skipContents.
func skipped(rel string) bool {
	for _, d := range skipContents {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// layerWriter writes one gzip-compressed layer tar, remembering hard links
// so a file reached twice is stored once.
type layerWriter struct {
	tw    *tar.Writer
	links map[[2]uint64]string
}

// writeLayer writes the layer that turns the tree lower into upper (lower
// "" for a base layer holding all of upper) to the gzip file out: new or
// changed entries, and whiteouts for entries upper no longer has.
func writeLayer(out, upper, lower string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating layer: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing layer %q: %w", out, cerr)
		}
	}()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return fmt.Errorf("compressing layer: %w", err)
	}
	lw := &layerWriter{tw: tar.NewWriter(zw), links: map[[2]uint64]string{}}
	if err := lw.walk(upper, lower, "."); err != nil {
		return err
	}
	if err := lw.tw.Close(); err != nil {
		return fmt.Errorf("finishing layer tar: %w", err)
	}
	return zw.Close()
}

// walk writes the entries of directory rel (under upper) that lower lacks
// or has differently, in name order, and whiteouts for lower's extra ones.
func (lw *layerWriter) walk(upper, lower, rel string) error {
	names, err := readNames(filepath.Join(upper, rel))
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := lw.entry(upper, lower, filepath.Join(rel, n)); err != nil {
			return err
		}
	}
	if lower == "" {
		return nil
	}
	return lw.whiteouts(upper, lower, rel)
}

// entry writes rel if it is new or changed, and descends into directories.
func (lw *layerWriter) entry(upper, lower, rel string) error {
	if skipped(rel) {
		return nil
	}
	fi, err := os.Lstat(filepath.Join(upper, rel))
	if err != nil {
		return fmt.Errorf("reading %q: %w", rel, err)
	}
	if !fi.Mode().IsDir() && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		return nil // device nodes, fifos and sockets never belong in an image
	}
	sub := lower
	if lower != "" {
		same, lowerDir, err := unchanged(filepath.Join(upper, rel), filepath.Join(lower, rel), fi)
		if err != nil {
			return err
		}
		if same && fi.IsDir() {
			return lw.walk(upper, lower, rel)
		}
		if same {
			return nil
		}
		if !lowerDir {
			sub = "" // a directory new to this layer: all of it goes in
		}
	}
	if err := lw.header(upper, rel, fi); err != nil {
		return err
	}
	if fi.IsDir() {
		return lw.walk(upper, sub, rel)
	}
	return nil
}

// header writes rel's tar header (and content, or a hard link to an entry
// of this layer already written).
func (lw *layerWriter) header(upper, rel string, fi fs.FileInfo) error {
	p := filepath.Join(upper, rel)
	target := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("reading link %q: %w", rel, err)
		}
		target = t
	}
	h, err := tar.FileInfoHeader(fi, target)
	if err != nil {
		return fmt.Errorf("describing %q: %w", rel, err)
	}
	h.Name, h.Uname, h.Gname = filepath.ToSlash(rel), "", ""
	if fi.IsDir() {
		h.Name += "/"
	}
	h.Format, h.ModTime, h.AccessTime, h.ChangeTime = tar.FormatPAX, clamp(fi.ModTime()), time.Time{}, time.Time{}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().IsRegular() && st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := lw.links[key]; ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			return lw.write(h, "")
		}
		lw.links[key] = h.Name
	}
	if fi.Mode().IsRegular() {
		return lw.write(h, p)
	}
	return lw.write(h, "")
}

// write writes h, then the content of file p when p is not "".
func (lw *layerWriter) write(h *tar.Header, p string) error {
	if err := lw.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("writing %q: %w", h.Name, err)
	}
	if p == "" {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("opening %q: %w", p, err)
	}
	defer f.Close()
	if _, err := io.Copy(lw.tw, f); err != nil {
		return fmt.Errorf("copying %q: %w", p, err)
	}
	return nil
}

// whiteouts writes a whiteout for each entry of lower's directory rel that
// upper's lacks.
func (lw *layerWriter) whiteouts(upper, lower, rel string) error {
	names, err := readNames(filepath.Join(lower, rel))
	if err != nil {
		return err
	}
	for _, n := range names {
		r := filepath.Join(rel, n)
		if skipped(r) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(upper, r)); errors.Is(err, fs.ErrNotExist) {
			h := &tar.Header{Name: filepath.ToSlash(filepath.Join(rel, ".wh."+n)), Typeflag: tar.TypeReg, Mode: 0o600, ModTime: epoch, Format: tar.FormatPAX}
			if err := lw.write(h, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// unchanged reports whether upper's entry equals lower's (type, mode,
// owner, link target or content), and whether lower's is a directory.
func unchanged(up, low string, fi fs.FileInfo) (same, lowerDir bool, err error) {
	li, err := os.Lstat(low)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("reading %q: %w", low, err)
	}
	us, ls := fi.Sys().(*syscall.Stat_t), li.Sys().(*syscall.Stat_t)
	if fi.Mode() != li.Mode() || us.Uid != ls.Uid || us.Gid != ls.Gid {
		return false, li.IsDir(), nil
	}
	switch {
	case fi.IsDir():
		return true, true, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		a, err1 := os.Readlink(up)
		b, err2 := os.Readlink(low)
		return err1 == nil && err2 == nil && a == b, false, nil
	case fi.Size() != li.Size():
		return false, false, nil
	}
	same, err = sameContent(up, low)
	return same, false, err
}

// sameContent reports whether files a and b hold the same bytes.
func sameContent(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, fmt.Errorf("reading %q: %w", a, err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, fmt.Errorf("reading %q: %w", b, err)
	}
	return bytes.Equal(x, y), nil
}

// readNames lists directory dir's entries in name order.
func readNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", dir, err)
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// clamp returns t, or epoch when t is later.
func clamp(t time.Time) time.Time {
	if t.After(epoch) {
		return epoch
	}
	return t
}
