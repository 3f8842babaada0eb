package spawn

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChildReachCoversTheChildsCopies: a child given a descriptor just
// below the executor's (a spawner with many boxes) overwrites it while
// it arranges its files, and /proc/self/fd/N then names a pipe; the
// executor's descriptor must be above childReach, and one above it runs.
func TestChildReachCoversTheChildsCopies(t *testing.T) {
	const n = 300
	bin, err := os.Open("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	defer bin.Close()
	exe, err := unix.FcntlInt(bin.Fd(), unix.F_DUPFD_CLOEXEC, n)
	if err != nil || exe != n {
		t.Skipf("descriptor %d is not free here (%d, %v)", n, exe, err)
	}
	defer unix.Close(exe)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	below, err := unix.FcntlInt(w.Fd(), unix.F_DUPFD_CLOEXEC, n-1)
	if err != nil || below != n-1 {
		t.Skipf("descriptor %d is not free here (%d, %v)", n-1, below, err)
	}
	low := os.NewFile(uintptr(below), "below")
	defer low.Close()
	stdio := [3]*os.File{nil, nil, nil}
	reach := childReach(stdio, []*os.File{low})
	if reach < n {
		t.Fatalf("childReach with a file at %d = %d, want at least %d (the child's copies land there)", n-1, reach, n)
	}
	run := func(fd int) error {
		c := exec.Command(fmt.Sprintf("/proc/self/fd/%d", fd))
		c.ExtraFiles = []*os.File{low}
		return c.Run()
	}
	if err := run(exe); err == nil {
		t.Logf("descriptor %d survived the child's copies here; the bound is still what the child may write", exe)
	}
	above, err := unix.FcntlInt(uintptr(exe), unix.F_DUPFD_CLOEXEC, reach+1)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(above)
	if err := run(above); err != nil {
		t.Errorf("exec of /proc/self/fd/%d (above childReach %d): %v, want it to run", above, reach, err)
	}
}

// TestChildReach: the highest descriptor os/exec's child may write.
func TestChildReach(t *testing.T) {
	var none [3]*os.File
	for _, tt := range []struct {
		extra []*os.File
		want  int
	}{
		{nil, 3 + 3 + 2},
		{make([]*os.File, 5), 8 + 8 + 2},
	} {
		if got := childReach(none, tt.extra); got != tt.want {
			t.Errorf("childReach(%d extra, none open) = %d, want %d", len(tt.extra), got, tt.want)
		}
	}
}
