package agent

import (
	"errors"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestShutdownControl: an open connection is shut (its peer reads EOF); a
// closed one is refused, never shut by a number another file may hold.
func TestShutdownControl(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	defer box.Close()
	if err := ShutdownControl(host); err != nil {
		t.Fatalf("ShutdownControl(open) = %v, want nil", err)
	}
	if n, err := box.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("peer read after the shutdown = %d, %v; want 0, EOF", n, err)
	}
	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ShutdownControl(host); !errors.Is(err, os.ErrClosed) {
		t.Errorf("ShutdownControl(closed) = %v, want os.ErrClosed", err)
	}
}
