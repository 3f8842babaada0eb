package poddial

import (
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestShutdownEndsThePeer: a session's Kill shuts the connection down, so
// the Pod's agent reads its end at once, while the router's descriptor
// stays open (its number is not reused before the session closes it).
func TestShutdownEndsThePeer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// non-blocking, so that os.File polls them and a read can have a deadline
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	router, pod := os.NewFile(uintptr(fds[0]), "router"), os.NewFile(uintptr(fds[1]), "pod")
	defer router.Close()
	defer pod.Close()
	shutdown(router, nil)
	if err := pod.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := pod.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the Pod's end read %d bytes, %v after the shutdown; want io.EOF", n, err)
	}
	if _, err := unix.FcntlInt(router.Fd(), unix.F_GETFD, 0); err != nil {
		t.Errorf("the router's descriptor after the shutdown: %v, want it still open", err)
	}
}
