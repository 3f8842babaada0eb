package streamrelay

import (
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unixPair is a connected pair of unix stream sockets.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "sock")
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// TestDuplexHalfCloses: a client's half-close reaches the proxy, whose
// answer still comes back, as a request and response would, across a
// channel and a socket.
func TestDuplexHalfCloses(t *testing.T) {
	client, box := channelPair(t)
	proxy, host := unixPair(t)
	done := make(chan struct{})
	go func() { defer close(done); Duplex(box, host) }()
	go func() {
		got, _ := io.ReadAll(proxy) // compared by what comes back
		_, _ = proxy.Write(append([]byte("saw "), got...))
		_ = proxy.CloseWrite()
	}()
	if _, err := client.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	if err := client.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(client); err != nil || string(got) != "saw GET" {
		t.Errorf("the client read %q, %v; want \"saw GET\"", got, err)
	}
	waitClosed(t, done, "Duplex")
}

// TestDuplexFailureClosesBoth: a direction that fails (here the client
// reads no more, so the box's writes fail) closes both ends, so the
// other direction ends too and the proxy sees its connection close.
func TestDuplexFailureClosesBoth(t *testing.T) {
	client, box := channelPair(t)
	proxy, host := unixPair(t)
	done := make(chan struct{})
	go func() { defer close(done); Duplex(box, host) }()
	client.CloseRead()
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatal("the proxy's writes still go through after the client stopped reading")
		}
		if _, err := proxy.Write([]byte("x")); err != nil {
			break // the relay closed the proxy's connection
		}
		time.Sleep(time.Millisecond)
	}
	waitClosed(t, done, "Duplex")
}

func waitClosed(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatalf("%s did not return within %v", what, testWait)
	}
}
