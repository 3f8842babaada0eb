package agent

import (
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestCloseDuringBlockedSpawn closes a session while a spawn's send is
// stuck on a box that reads nothing: the close must not wait for the
// send's timeout and blame the box for it (a breach), as it did while a
// request held the pause lock across its send.
func TestCloseDuringBlockedSpawn(t *testing.T) {
	s, _, _ := attachFake(t)
	fillHostToBox(t, s.f.Control)
	files := make([]*os.File, 3)
	for i := range files {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		files[i] = f
	}
	spawned := make(chan error, 1)
	go func() {
		_, err := s.Spawn(context.Background(), interp.Command{Argv: []string{"true"}, Files: files})
		spawned <- err
	}()
	testhost.WaitFor(t, "the spawn to register its process", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.nextID == 2
	})
	s.Close()
	if err := <-spawned; err == nil {
		t.Errorf("Spawn() on a closed session = nil, want an error")
	}
	if err := s.Err(); errors.Is(err, nsinit.ErrProtocol) {
		t.Errorf("session's Err() = %v, want no protocol breach: the box did nothing wrong", err)
	}
}

// fillHostToBox writes until the host-to-box direction of control is
// full, so the next send blocks; the fake box never reads it. Each write
// is MSG_DONTWAIT, leaving the socket itself blocking as the session has it.
func fillHostToBox(t *testing.T, control *os.File) {
	t.Helper()
	junk := make([]byte, 64<<10)
	for range 1 << 12 {
		err := unix.Sendto(int(control.Fd()), junk, unix.MSG_DONTWAIT, nil)
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the control socket never filled")
}
