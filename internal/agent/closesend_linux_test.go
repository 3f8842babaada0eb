package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
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

// TestRequestAfterEnd ends the session while a spawn's request is between
// its first check of the session and the registration of its process
// (requestHook). endWith settles only the processes registered when it
// runs, so the request must see the end and fail: it used to register
// the process after the end and send it to a box still reading, and hand
// back a process nothing would ever settle.
func TestRequestAfterEnd(t *testing.T) {
	s, _ := startFakeSession(t, spec.Limits{}, fakeProgram{run: func([]*os.File) (nsinit.Status, bool) { return nsinit.Status{}, true }})
	entered, gate := make(chan struct{}), make(chan struct{})
	s.requestHook = func() {
		close(entered)
		<-gate
	}
	type result struct {
		p   *Process
		err error
	}
	requested := make(chan result, 1)
	cmd := devNullCommand(t) // off the test's goroutine its t.Fatal would not stop the test
	go func() {
		p, err := s.request(cmd)
		requested <- result{p, err}
	}()
	<-entered
	s.end(errors.New("a breach the host found"))
	<-s.Done()
	close(gate)
	got := <-requested
	if got.p != nil || got.err == nil {
		t.Fatalf("request() across the session's end = process %v, %v; want no process and the session's end", got.p != nil, got.err)
	}
	if !strings.Contains(got.err.Error(), "a breach the host found") {
		t.Errorf("request() across the session's end = %v, want the session's end (a breach the host found)", got.err)
	}
	s.mu.Lock()
	left := len(s.procs)
	s.mu.Unlock()
	if left != 0 {
		t.Errorf("after the session's end %d processes are registered, want none", left)
	}
}
