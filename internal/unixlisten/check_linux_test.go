package unixlisten

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheck: only a listening unix stream socket passes; every other
// descriptor, above all a TCP listener of the host's network, is
// refused saying what it is.
func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) *os.File
		want string
	}{
		{"listening unix stream", func(t *testing.T) *os.File {
			return listenerFile(t, "unix", filepath.Join(t.TempDir(), "s"))
		}, ""},
		{"listening unix stream, abstract", func(t *testing.T) *os.File {
			return listenerFile(t, "unix", "@warden-unixlisten-test-"+filepath.Base(t.TempDir()))
		}, ""},
		{"file", func(t *testing.T) *os.File {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}, "is not a socket"},
		{"listening TCP", func(t *testing.T) *os.File { return listenerFile(t, "tcp", "127.0.0.1:0") }, "family AF_INET, type SOCK_STREAM, not a unix stream socket"},
		{"UDP", func(t *testing.T) *os.File { return socketFile(t, unix.AF_INET, unix.SOCK_DGRAM) }, "family AF_INET, type SOCK_DGRAM, not"},
		{"unix datagram", func(t *testing.T) *os.File { return socketFile(t, unix.AF_UNIX, unix.SOCK_DGRAM) }, "family AF_UNIX, type SOCK_DGRAM, not"},
		{"unix seqpacket", func(t *testing.T) *os.File { return socketFile(t, unix.AF_UNIX, unix.SOCK_SEQPACKET) }, "family AF_UNIX, type SOCK_SEQPACKET, not"},
		{"unix stream not listening", func(t *testing.T) *os.File { return socketFile(t, unix.AF_UNIX, unix.SOCK_STREAM) }, "does not listen"},
		{"connected unix stream", func(t *testing.T) *os.File {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fds[1]) })
			return os.NewFile(uintptr(fds[0]), "socketpair")
		}, "does not listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.open(t)
			defer f.Close()
			err := Check(f)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check: got %v, want an error containing %q (none if empty)", err, tt.want)
			}
		})
	}
}

// listenerFile is a copy of a listener on addr; the listener itself is
// closed.
func listenerFile(t *testing.T, network, addr string) *os.File {
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(interface{ File() (*os.File, error) }).File()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// socketFile is a new socket, neither bound nor listening.
func socketFile(t *testing.T, domain, typ int) *os.File {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "socket")
}
