package testhost

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// maxFill bounds how many descriptors ExhaustFDs opens.
const maxFill = 4096

// ExhaustFDs fills this process's descriptor table, as a server at its
// RLIMIT_NOFILE under a flood of connections is: it lowers the soft limit
// to just above the highest descriptor open now and opens copies of
// /dev/null until the kernel answers EMFILE, then closes spare of them, so
// that exactly spare descriptors can still be opened. The returned
// function (also run at the test's end) closes them and restores the
// limit; call it before anything else the test needs descriptors for.
func ExhaustFDs(t testing.TB, spare int) (release func()) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("reading RLIMIT_NOFILE: %v", err)
	}
	top := highestFD(t)
	lowered := old
	lowered.Cur = uint64(top) + 1 + 8
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatalf("lowering RLIMIT_NOFILE: %v", err)
	}
	var held []int
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		for _, fd := range held {
			unix.Close(fd)
		}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	}
	t.Cleanup(release)
	for range maxFill {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			for ; spare > 0 && len(held) > 0; spare-- {
				unix.Close(held[len(held)-1])
				held = held[:len(held)-1]
			}
			return release
		}
		if err != nil {
			release()
			t.Fatalf("filling the descriptor table: %v", err)
		}
		held = append(held, fd)
	}
	release()
	t.Fatalf("%d descriptors did not fill the table", maxFill)
	return release
}

// highestFD is the largest descriptor number this process has open.
func highestFD(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listing descriptors: %v", err)
	}
	top := 0
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > top {
			top = n
		}
	}
	return top
}

// DenyFDs makes every new descriptor of this process fail with EMFILE,
// even in numbers freed meanwhile: it sets the soft RLIMIT_NOFILE to 0.
// That is a server under a flood of connections whose accept loop takes
// back each descriptor as soon as it is freed. The returned function
// (also run at the test's end) restores the limit.
func DenyFDs(t testing.TB) (release func()) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("reading RLIMIT_NOFILE: %v", err)
	}
	denied := old
	denied.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &denied); err != nil {
		t.Fatalf("lowering RLIMIT_NOFILE: %v", err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	}
	t.Cleanup(release)
	return release
}
