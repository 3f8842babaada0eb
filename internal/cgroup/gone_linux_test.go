package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGoneAsNotExist: a read that finds its cgroup removed (ENODEV) is
// fs.ErrNotExist, as a missing file is, so a kill racing the removal of
// an ended process's cgroup finds no processes instead of failing; other
// errors stay what they were.
func TestGoneAsNotExist(t *testing.T) {
	for _, tc := range []struct {
		err     error
		missing bool
	}{
		{&os.PathError{Op: "read", Path: "x/cgroup.procs", Err: unix.ENODEV}, true},
		{&os.PathError{Op: "open", Path: "x/cgroup.procs", Err: unix.ENOENT}, true},
		{&os.PathError{Op: "read", Path: "x/cgroup.procs", Err: unix.EACCES}, false},
	} {
		got := goneAsNotExist(tc.err)
		if errors.Is(got, fs.ErrNotExist) != tc.missing || !errors.Is(got, tc.err) {
			t.Errorf("goneAsNotExist(%v) = %v: not-exist %v, want %v (and the cause kept)", tc.err, got, !tc.missing, tc.missing)
		}
	}
}

// TestRemovedCgroupReadsENODEV: the kernel answers a read of a file of a
// cgroup removed after the open with ENODEV, the case goneAsNotExist
// covers (root and a cgroup hierarchy needed).
func TestRemovedCgroupReadsENODEV(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	var top string
	for _, d := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			top = d
			break
		}
	}
	if top == "" {
		t.Skip("no cgroup hierarchy with cgroup.procs found")
	}
	dir, err := os.MkdirTemp(top, "warden-gone-test-")
	if err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	fd, err := unix.Open(dir+"/cgroup.procs", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	_, err = unix.Read(fd, make([]byte, 64))
	if !errors.Is(err, unix.ENODEV) {
		t.Fatalf("reading a removed cgroup's cgroup.procs: got %v, want ENODEV", err)
	}
	if got := goneAsNotExist(&os.PathError{Op: "read", Path: dir, Err: err}); !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("goneAsNotExist = %v, want fs.ErrNotExist", got)
	}
}
