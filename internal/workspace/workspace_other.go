//go:build !linux

package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Dir is an open workspace; off Linux there is none to open.
type Dir struct{}

// Open is Linux-only: it relies on openat2(2) and per-thread file
// identities.
func Open(dir string, uid, gid int, lim Limits) (*Dir, error) {
	return nil, fmt.Errorf("opening workspace %q: %w", dir, errors.ErrUnsupported)
}

// FromFile is Linux-only, like Open.
func FromFile(f *os.File, name string, uid, gid int, lim Limits) (*Dir, error) {
	return nil, fmt.Errorf("opening workspace %q: %w", name, errors.ErrUnsupported)
}

// Close has nothing to release.
func (d *Dir) Close() error { return nil }

// Stat is Linux-only, like Open.
func (d *Dir) Stat(p string) (Entry, error) { return Entry{}, unsupported(p) }

// List is Linux-only, like Open.
func (d *Dir) List(p string) ([]Entry, error) { return nil, unsupported(p) }

// Read is Linux-only, like Open.
func (d *Dir) Read(p string) (io.ReadCloser, Entry, error) { return nil, Entry{}, unsupported(p) }

// Write is Linux-only, like Open.
func (d *Dir) Write(p string, r io.Reader, mode fs.FileMode) (Entry, error) {
	return Entry{}, unsupported(p)
}

// Mkdir is Linux-only, like Open.
func (d *Dir) Mkdir(p string) (Entry, error) { return Entry{}, unsupported(p) }

// MkdirMode is Linux-only, like Open.
func (d *Dir) MkdirMode(p string, mode fs.FileMode) (Entry, error) { return Entry{}, unsupported(p) }

// Remove is Linux-only, like Open.
func (d *Dir) Remove(p string, recursive bool) error { return unsupported(p) }

// Rename is Linux-only, like Open.
func (d *Dir) Rename(src, dst string) (Entry, error) { return Entry{}, unsupported(src) }

// AddWatch is Linux-only, like Open.
func (d *Dir) AddWatch(inotifyFD int, p string, mask uint32) (int, error) {
	return -1, unsupported(p)
}

// Owner is Linux-only, like Open: there is no user to act as.
func (d *Dir) Owner() (uid, gid int) { return -1, -1 }

func unsupported(p string) error {
	return fmt.Errorf("workspace %q: %w", p, errors.ErrUnsupported)
}
