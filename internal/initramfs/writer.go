// Package initramfs writes the "newc" cpio archives Linux unpacks as its
// initial root file system. The microVM backend builds each guest's
// initramfs in Go, so the archive is byte-for-byte reproducible (mtime 0,
// uid/gid 0, inode numbers in the order entries are added) and no cpio(1)
// is run on the host. The writer refuses names the kernel's unpacker
// would resolve outside the archive's root or out of order.
package initramfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxNameLen bounds an entry's name: the kernel's unpacker refuses names
// longer than PATH_MAX (4096 with the NUL).
const MaxNameLen = 4095

// File-type bits of a newc mode word (the S_IF* values).
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// Writer appends entries to one archive. Entries are written in the order
// they are added, so a caller adding them in a fixed order gets the same
// bytes every time. The first error sticks: every later call returns it.
type Writer struct {
	w      io.Writer
	ino    uint32
	off    int64
	names  map[string]bool // every entry added, to refuse duplicates
	dirs   map[string]bool // the directories, which may hold later entries
	err    error
	closed bool
}

// NewWriter returns a Writer appending to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, names: map[string]bool{}, dirs: map[string]bool{}}
}

// Dir adds a directory with permission bits perm.
func (w *Writer) Dir(name string, perm fs.FileMode) error {
	if err := w.add(name, modeDir, perm, header{nlink: 2}, nil, nil); err != nil {
		return err
	}
	w.dirs[name] = true
	return nil
}

// File adds a regular file holding data.
func (w *Writer) File(name string, perm fs.FileMode, data []byte) error {
	return w.add(name, modeRegular, perm, header{nlink: 1, size: uint32(len(data))}, data, nil)
}

// FileFrom adds a regular file with the contents of f, an open host file
// (read through its descriptor, so the file checked by whoever opened it
// is the file copied). Its size is taken from fstat; a file that shrinks
// or grows while it is copied is an error rather than a corrupt archive.
func (w *Writer) FileFrom(name string, perm fs.FileMode, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs %q: stat %s: %w", name, f.Name(), err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs %q: %s is not a regular file", name, f.Name())
	}
	if st.Size() > int64(^uint32(0)) {
		return fmt.Errorf("initramfs %q: %s is %d bytes, over newc's 4 GiB limit", name, f.Name(), st.Size())
	}
	return w.add(name, modeRegular, perm, header{nlink: 1, size: uint32(st.Size())}, nil, f)
}

// Symlink adds a symbolic link to target. The target is stored as given:
// it is resolved inside the guest, never on the host.
func (w *Writer) Symlink(name, target string) error {
	if target == "" || len(target) > MaxNameLen || strings.IndexByte(target, 0) >= 0 {
		return w.fail(fmt.Errorf("initramfs %q: symlink target must be 1-%d bytes without NUL", name, MaxNameLen))
	}
	return w.add(name, modeSymlink, 0o777, header{nlink: 1, size: uint32(len(target))}, []byte(target), nil)
}

// CharDev adds a character device node major:minor, such as /dev/console
// (5:1), which the kernel opens for init's stdio before devtmpfs exists.
func (w *Writer) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	return w.add(name, modeCharDev, perm, header{nlink: 1, rmajor: major, rminor: minor}, nil, nil)
}

// Close writes the trailer entry that ends the archive. It does not close
// the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.entry("TRAILER!!!", header{nlink: 1}, nil, nil); err != nil {
		return err
	}
	w.closed = true
	w.err = errors.New("initramfs: archive already closed")
	return nil
}

// add validates one entry and writes it.
func (w *Writer) add(name string, typ uint32, perm fs.FileMode, h header, data []byte, src io.Reader) error {
	if w.err != nil {
		return w.err
	}
	if perm&^0o7777 != 0 {
		return w.fail(fmt.Errorf("initramfs %q: mode %v has bits beyond permissions; pass only 0-07777", name, perm))
	}
	if err := w.checkName(name); err != nil {
		return w.fail(err)
	}
	w.ino++
	h.ino, h.mode = w.ino, typ|uint32(perm)
	if err := w.entry(name, h, data, src); err != nil {
		return err
	}
	w.names[name] = true
	return nil
}

// checkName refuses a name the kernel's unpacker would place outside the
// root, twice, or before its parent directory.
func (w *Writer) checkName(name string) error {
	switch {
	case name == "" || len(name) > MaxNameLen:
		return fmt.Errorf("initramfs: name %q must be 1-%d bytes", name, MaxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("initramfs: name %q holds a NUL byte", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("initramfs: name %q is absolute; give it relative to the root (drop the leading /)", name)
	case name == "TRAILER!!!":
		return fmt.Errorf("initramfs: name %q is the archive's end marker", name)
	case w.names[name]:
		return fmt.Errorf("initramfs: %q is added twice", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("initramfs: name %q has an empty, \".\" or \"..\" component", name)
		}
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 && !w.dirs[name[:i]] {
		return fmt.Errorf("initramfs: %q comes before its directory %q; add the directory first", name, name[:i])
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.err = err
	return err
}
