package streamrelay

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streammux"
)

// testWait bounds every wait; none asserts on timing.
const testWait = 20 * time.Second

// channelPair is one channel's two ends, over a socketpair.
func channelPair(t *testing.T) (*streammux.Channel, *streammux.Channel) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := streammux.New(os.NewFile(uintptr(fds[0]), "a"), streammux.DefaultConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := streammux.New(os.NewFile(uintptr(fds[1]), "b"), streammux.DefaultConfig(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mine, err := a.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	theirs, err := b.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return mine, theirs
}

// TestToChannel: a pipe's bytes and its end reach the peer.
func TestToChannel(t *testing.T) {
	mine, theirs := channelPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go ToChannel(mine, r)
	if _, err := w.Write([]byte("out")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, err := io.ReadAll(theirs); err != nil || string(got) != "out" {
		t.Errorf("the peer read %q, %v; want \"out\" and end of file", got, err)
	}
}

// TestFromChannelReaderGone: when the pipe's reader is gone the relay
// stops the channel, so the peer's writes fail as a pipe's would.
func TestFromChannelReaderGone(t *testing.T) {
	mine, theirs := channelPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	done := make(chan struct{})
	go func() { FromChannel(w, mine); close(done) }()
	if _, err := theirs.Write([]byte("in")); err != nil {
		t.Fatalf("the first write = %v, want it sent", err)
	}
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatalf("the relay still runs %s after its pipe's reader went", testWait)
	}
	// The stop is on its way: each later write fails once it came.
	var werr error
	for wait := time.Now().Add(testWait); werr == nil && time.Now().Before(wait); time.Sleep(time.Millisecond) {
		_, werr = theirs.Write([]byte("in"))
	}
	if !errors.Is(werr, streammux.ErrStopped) {
		t.Errorf("the peer's write = %v, want ErrStopped", werr)
	}
}
