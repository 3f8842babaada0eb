package podinit

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInheritedListener: a descriptor number taken as the listener
// serves connections to the unix listener's address; a TCP listener (a
// socket of the host's network, never to enter a box) and a number that
// is not open are refused.
func TestInheritedListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	f := listenerFile(t, "unix", path)
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln, err := inheritedListener(fd)
	if err != nil {
		t.Fatalf("inheritedListener(%d): %v", fd, err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatalf("accepting on the inherited listener: %v", err)
	}
	a.Close()
	tcp := listenerFile(t, "tcp", "127.0.0.1:0")
	tcpFD, err := unix.Dup(int(tcp.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	tcp.Close()
	if _, err := inheritedListener(tcpFD); !errorSays(err, "not a unix stream socket") {
		t.Errorf("inheritedListener(%d), a TCP listener: got %v, want a refusal", tcpFD, err)
	}
	if err := unix.FcntlFlock(uintptr(tcpFD), unix.F_GETLK, &unix.Flock_t{}); !errors.Is(err, unix.EBADF) {
		t.Errorf("the refused descriptor %d: got %v from fcntl, want it closed (EBADF)", tcpFD, err)
	}
	const closed = 1000 // far above what the test opens
	if _, err := inheritedListener(closed); !errorSays(err, "bad file descriptor") {
		t.Errorf("inheritedListener(%d), not open: got %v, want a bad descriptor error", closed, err)
	}
}

// listenerFile is a copy of a listener on addr; the listener itself is
// closed (a unix one without removing its path: the copy still listens
// there).
func listenerFile(t *testing.T, network, addr string) *os.File {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := l.(*net.UnixListener); ok {
		u.SetUnlinkOnClose(false)
	}
	defer l.Close()
	f, err := l.(interface{ File() (*os.File, error) }).File()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestUnderWardenInitRefused: the test's process is no child of a
// native sandbox's PID 1, so --in-warden-sandbox's check refuses it,
// saying to run as PID 1 in a Pod.
func TestUnderWardenInitRefused(t *testing.T) {
	if os.Getppid() == 1 {
		t.Skip("the test runs as a child of PID 1; the refusal cannot be seen here")
	}
	if err := checkUnderWardenInit(); !errorSays(err, "the mode must be the program of a native Warden sandbox") {
		t.Errorf("checkUnderWardenInit as pid %d: got %v, want a refusal naming the native sandbox", os.Getpid(), err)
	}
}

// TestWardenPID1: --in-warden-sandbox's check of PID 1's command line
// takes Warden's two sandbox inits by their exact names only.
func TestWardenPID1(t *testing.T) {
	tests := []struct {
		cmdline string
		ok      bool
	}{
		{"warden-init\x00", true},
		{"warden-init\x00pod\x00", true},
		{"warden-exec\x00", true},
		{"warden-init", true},
		{"tini\x00--\x00warden-init\x00", false},
		{"", false},
		{"warden-initX\x00", false},
		{"/x/warden-init\x00", false},
		{"/usr/bin/warden-exec\x00", false},
		{"dumb-init\x00", false},
	}
	for _, tt := range tests {
		err := wardenPID1([]byte(tt.cmdline))
		if (err == nil) != tt.ok {
			t.Errorf("wardenPID1(%q) = %v; want ok %v", tt.cmdline, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "not Warden's sandbox init") {
			t.Errorf("wardenPID1(%q) = %v; want it to say PID 1 is not Warden's", tt.cmdline, err)
		}
	}
}
