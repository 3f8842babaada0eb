package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/warden-sandbox/warden/internal/workspace"
)

// Capture copies the workspace src into the snapshot, every file and
// directory fsync'd unless it is temporary (BeginTemporary); src should
// not change meanwhile (the session's box is paused). src's Limits must
// allow files and listings as large as lim (see WorkspaceLimits). What
// the sandbox made unreadable to its own user (a directory it may not
// list, a path longer than MaxPath) is skipped and counted like a link,
// so its content cannot make every snapshot fail; a file over lim is
// ErrTooLarge. ctx is checked at each entry, so a session deleted
// meanwhile stops its copy.
func (p *Pending) Capture(ctx context.Context, src *workspace.Dir, lim Limits) (Stats, error) {
	var st Stats
	c := capture{ctx: ctx, src: src, lim: lim, st: &st}
	if err := p.captureDir(c, ".", 0); err != nil {
		return st, err
	}
	return st, nil
}

// WorkspaceLimits are the limits a workspace.Dir needs to read or write
// everything lim allows: each file may be as large as the whole, each
// directory may hold every entry.
func WorkspaceLimits(lim Limits) workspace.Limits {
	return workspace.Limits{MaxFileBytes: max(lim.MaxBytes, 1), MaxEntries: max(lim.MaxEntries, 1)}
}

// capture is one Capture's source, bounds and count.
type capture struct {
	ctx context.Context
	src *workspace.Dir
	lim Limits
	st  *Stats
}

// MaxPath bounds the length of a path a snapshot keeps, below the
// kernel's PATH_MAX, which the restore's opens of whole paths meet.
const MaxPath = 4000

func (p *Pending) captureDir(c capture, dir string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: %q nests deeper than %d directories", ErrTooLarge, dir, MaxDepth)
	}
	entries, err := c.src.List(dir)
	switch {
	case errors.Is(err, workspace.ErrTruncated):
		return fmt.Errorf("%w: directory %q holds more than %d entries (the session's inode limit)", ErrTooLarge, dir, c.lim.MaxEntries)
	case unreadable(err):
		c.st.Skipped++ // kept as an empty directory
	case err != nil:
		return err // it names the path
	}
	for _, e := range entries {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("copying %q: %w", e.Path, err)
		}
		if err := p.captureEntry(c, e, depth); err != nil {
			return err
		}
	}
	return p.syncIn(dir)
}

// unreadable says err is the workspace refusing an entry the sandbox
// made so (no permission, a link, gone, a path too long, a lease): it is
// skipped.
func unreadable(err error) bool {
	for _, kind := range []error{workspace.ErrHardLink, workspace.ErrDenied, workspace.ErrNotRegular, workspace.ErrBusy,
		workspace.ErrLink, workspace.ErrNotFound, workspace.ErrBadPath} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

func (p *Pending) captureEntry(c capture, e workspace.Entry, depth int) error {
	if len(e.Path) > MaxPath {
		c.st.Skipped++
		return nil
	}
	switch e.Type {
	case workspace.TypeDir:
		if err := c.st.add(c.lim, 0); err != nil {
			return err
		}
		c.st.Dirs++
		// The owner's bits are always rwx, so that a server that is not
		// root can fill the directory and read it back, and the restore,
		// as the sandbox user, fill it too; the group's and others' are
		// kept. Set-id and sticky bits are not: the workspace has one
		// user, so they guard nothing there.
		// Chmod too, since Mkdir's bits go through the server's umask.
		if err := p.root.Mkdir(e.Path, 0o700); err != nil {
			return fmt.Errorf("copying %q: %w", e.Path, err)
		}
		if err := p.root.Chmod(e.Path, e.Mode.Perm()|0o700); err != nil {
			return fmt.Errorf("copying %q: %w", e.Path, err)
		}
		return p.captureDir(c, e.Path, depth+1)
	case workspace.TypeFile:
		return p.captureFile(c.src, e, c.lim, c.st)
	}
	c.st.Skipped++
	return nil
}

// captureFile copies one regular file; what workspace.Dir refuses to
// read (hard links, files the sandbox user may not read, one replaced
// meanwhile) is skipped and counted; one over the size bound (a sparse
// file over the disk limit) is ErrTooLarge.
func (p *Pending) captureFile(src *workspace.Dir, e workspace.Entry, lim Limits, st *Stats) error {
	r, ent, err := src.Read(e.Path)
	switch {
	case unreadable(err):
		st.Skipped++
		return nil
	case errors.Is(err, workspace.ErrTooLarge):
		return fmt.Errorf("%w: file %q is over %d bytes (the session's disk limit)", ErrTooLarge, e.Path, lim.MaxBytes)
	case err != nil:
		return fmt.Errorf("reading %q: %w", e.Path, err)
	}
	defer r.Close()
	if err := st.add(lim, ent.Size); err != nil {
		return err
	}
	st.Files++
	f, err := p.root.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, ent.Mode.Perm())
	if err != nil {
		return fmt.Errorf("copying %q: %w", e.Path, err)
	}
	// No more than the size charged, if the file grew meanwhile.
	_, err = workspace.CopyN(f, r, ent.Size)
	if errors.Is(err, io.EOF) {
		err = nil // it shrank: what it holds is copied
	}
	if err == nil && p.durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %q: %w", e.Path, err)
	}
	return nil
}

// syncIn fsyncs directory dir of the snapshot if p is durable.
func (p *Pending) syncIn(dir string) error {
	if !p.durable {
		return nil
	}
	d, err := p.root.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %q: %w", dir, err)
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// Restore copies snapshot name into the workspace dst, as dst's sandbox
// user, within lim; dst should be empty (see Clear). ctx is checked at
// each entry.
func (s *Store) Restore(ctx context.Context, name string, dst *workspace.Dir, lim Limits) (Stats, error) {
	r, err := s.open(name)
	if err != nil {
		return Stats{}, err
	}
	defer r.Close()
	var st Stats
	err = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return restoreEntry(r, dst, p, d, lim, &st)
	})
	if err != nil {
		return st, fmt.Errorf("restoring snapshot %s: %w", name, err)
	}
	return st, nil
}

func restoreEntry(r *os.Root, dst *workspace.Dir, p string, d fs.DirEntry, lim Limits, st *Stats) error {
	switch {
	case d.IsDir():
		if err := st.add(lim, 0); err != nil {
			return err
		}
		st.Dirs++
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("reading the mode of %q: %w", p, err)
		}
		// The captured bits: the owner's are rwx (see captureEntry), the
		// group's and others' the workspace's own.
		_, err = dst.MkdirMode(p, info.Mode().Perm())
		return err
	case !d.Type().IsRegular():
		st.Skipped++
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	if err := st.add(lim, info.Size()); err != nil {
		return err
	}
	st.Files++
	f, err := r.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = dst.Write(p, f, info.Mode().Perm())
	return err
}

// Clear removes everything in the workspace dst, so a restore starts
// from nothing (a template may have seeded files the snapshot had not).
func Clear(dst *workspace.Dir) error {
	entries, err := dst.List(".")
	if err != nil {
		return fmt.Errorf("clearing the workspace: %w", err)
	}
	for _, e := range entries {
		if err := dst.Remove(path.Clean(e.Path), true); err != nil {
			return fmt.Errorf("clearing the workspace: %w", err)
		}
	}
	return nil
}
