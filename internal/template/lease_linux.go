package template

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lease gets the template called name for a sandbox to run on, and keeps
// it: while the returned release has not been called, Remove refuses the
// template, in this process or any other sharing the store (a CLI's
// `warden template rm` beside a server's sessions). A lease is a shared
// flock on the template's directory, so it ends with its process too: a
// crashed server leaves no template held. The template's metadata is
// read under the lease, so it is the leased directory's own (LeaseFor
// checks its SharedWith).
func (s *Store) Lease(name string) (Template, func(), error) {
	if err := ValidName(name); err != nil {
		return Template{}, nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	f, err := os.Open(s.templateDir(name))
	if err != nil {
		return Template{}, nil, notFound(name)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		s.closeLease(f)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return Template{}, nil, fmt.Errorf("%w %q: it is being removed, see warden template ls", ErrNotFound, name)
		}
		return Template{}, nil, fmt.Errorf("leasing template %q: %w", name, err)
	}
	// Remove may have taken the directory away between Get and the lock.
	if !sameFile(f, s.templateDir(name)) {
		s.closeLease(f)
		return Template{}, nil, notFound(name)
	}
	t, err := s.Get(name)
	if err != nil {
		s.closeLease(f)
		return Template{}, nil, err
	}
	return t, func() { s.closeLease(f) }, nil
}

func (s *Store) closeLease(f *os.File) {
	if err := f.Close(); err != nil {
		s.o.Log.Warn("releasing a template lease", "dir", f.Name(), "err", err)
	}
}

// holdForRemoval takes the template directory's exclusive lock, or
// refuses while a sandbox holds a Lease on it. The caller removes the
// directory, then calls the release returned.
func (s *Store) holdForRemoval(name string) (func(), error) {
	f, err := os.Open(s.templateDir(name))
	if err != nil {
		return nil, fmt.Errorf("removing template %q: %w", name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		s.closeLease(f)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("template %q is in use by a running sandbox or session: end those (or stop the server using it) and remove it again", name)
		}
		return nil, fmt.Errorf("removing template %q: %w", name, err)
	}
	return func() { s.closeLease(f) }, nil
}

// sameFile says f is the file at path now.
func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}
