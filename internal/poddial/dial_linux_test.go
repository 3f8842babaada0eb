package poddial

import (
	"bytes"
	"io"
	"log/slog"
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

// TestShutdownClosedLogsNothing: shutting down a connection the session
// closed already (its stream closes it when the Pod hangs up) is no
// failure, and a failure that is one is logged.
func TestShutdownClosedLogsNothing(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	open, closed := os.NewFile(uintptr(fds[0]), "open"), os.NewFile(uintptr(fds[1]), "closed")
	defer open.Close()
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name string
		f    *os.File
		warn bool
	}{
		{"open socket", open, false},
		{"closed by the session", closed, false},
		{"not a socket", r, true},
	} {
		var buf bytes.Buffer
		shutdown(tc.f, slog.New(slog.NewTextHandler(&buf, nil)))
		if got := buf.Len() > 0; got != tc.warn {
			t.Errorf("%s: logged %q; want a warning: %v", tc.name, buf.String(), tc.warn)
		}
	}
}
