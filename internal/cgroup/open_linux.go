package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// OpenFreezer opens the cgroup named name where New would have made it, but that another
// program made (a gVisor box's, which runsc creates from the bundle's cgroupsPath), for its
// freezer alone: the Freezer writes no file of it but the freezer's own. name must be
// this process's (boxname.New), as New's are. It fails with an error wrapping
// fs.ErrNotExist when there is no such cgroup, and errors.ErrUnsupported where the host
// cannot freeze one (v1 without the freezer hierarchy, v2 without cgroup.freeze).
func OpenFreezer(name string) (Freezer, error) {
	if err := validateName(name, os.Getpid()); err != nil {
		return nil, err
	}
	s := current()
	switch {
	case s.err != nil:
		return nil, s.err
	case s.v1 != nil:
		return openV1Freezer(s.v1, name)
	case s.v2 != nil && s.v2.err == nil:
		return openV2Freezer(s.v2, name)
	}
	return nil, fmt.Errorf("opening cgroup %s to freeze it: %w: no cgroup hierarchy is mounted", name, errors.ErrUnsupported)
}

func openV1Freezer(lay *v1Layout, name string) (Freezer, error) {
	for _, hr := range lay.hiers {
		if !hasCtl(hr.ctls, ctlFreezer) {
			continue
		}
		dir := hr.base + "/" + name
		if err := isDir(dir); err != nil {
			return nil, err
		}
		return &freezer{dir: dir, f: &v1Cgroup{name: name, freezer: dir, dirs: []v1Dir{{path: dir, ctls: ctlFreezer}}}}, nil
	}
	return nil, fmt.Errorf("opening cgroup %s to freeze it: %w: the v1 freezer hierarchy is not mounted on this host", name, errors.ErrUnsupported)
}

func openV2Freezer(lay *v2Layout, name string) (Freezer, error) {
	dir := lay.base + "/" + parentDir + "/" + name
	if err := isDir(dir); err != nil {
		return nil, err
	}
	if err := unix.Access(dir+"/cgroup.freeze", unix.W_OK); err != nil {
		return nil, fmt.Errorf("opening cgroup %s to freeze it: %w: it has no writable cgroup.freeze (Linux 5.2 added it): %w", dir, errors.ErrUnsupported, err)
	}
	return &freezer{dir: dir, f: &v2Cgroup{dir: dir}}, nil
}

// isDir says why dir is not a directory, wrapping fs.ErrNotExist when it is missing.
func isDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("opening cgroup %s to freeze it: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("opening cgroup %s to freeze it: %w: not a directory", dir, fs.ErrNotExist)
	}
	return nil
}

// freezer is a Freezer: a cgroup's Freeze and Thaw, and its process list.
type freezer struct {
	dir string
	f   interface {
		Freeze(timeout time.Duration) error
		Thaw() error
	}
}

func (z *freezer) Freeze(timeout time.Duration) error { return z.f.Freeze(timeout) }
func (z *freezer) Thaw() error                        { return z.f.Thaw() }
func (z *freezer) Procs() ([]int, error)              { return readPids(z.dir) }
func (z *freezer) Path() string                       { return z.dir }
