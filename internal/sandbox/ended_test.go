package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// causeError is a box's end with a cause, as agent.Session reports it.
type causeError struct{ cause string }

func (e causeError) Error() string { return "the sandbox has ended: " + e.cause }
func (e causeError) Cause() string { return e.cause }

// TestExecNamesWhyItsSandboxDied: an exec during which the sandbox dies
// fails with the cause, in one clause, not only that the session ended.
func TestExecNamesWhyItsSandboxDied(t *testing.T) {
	m, b := newTestManager(t, Config{})
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookup("alice", info.ID)
	box := s.box.(*fakeBox)
	box.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{"sleep"}}, Stream{})
		done <- err
	}()
	for i := 0; ; i++ {
		b.mu.Lock()
		running := b.lastExec == box
		b.mu.Unlock()
		if running {
			break
		}
		if i == 10000 {
			t.Fatal("the exec did not start")
		}
		time.Sleep(time.Millisecond)
	}
	box.err = causeError{"its init ended (signal: killed)"}
	_ = box.Close()
	close(box.block)
	err = <-done
	const want = "ended during the exec: its sandbox ended unexpectedly: its init ended (signal: killed)"
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), want) {
		t.Errorf("Exec() when the sandbox died = %v, want ErrClosed saying %q", err, want)
	}
}

// TestCleanupErrorsAreReported: what a sandbox's Close could not clean
// up reaches OnCleanupError, and the Delete that ended it still succeeds
// (the session is gone).
func TestCleanupErrorsAreReported(t *testing.T) {
	var mu sync.Mutex
	var reported []error
	m, _ := newTestManager(t, Config{OnCleanupError: func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}})
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookup("alice", info.ID)
	left := errors.New("removing cgroup x: device or resource busy")
	s.box.(*fakeBox).closeErr = left
	if err := m.Delete(context.Background(), "alice", info.ID); err != nil {
		t.Errorf("Delete() = %v, want nil (the session is gone)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.Is(reported[0], left) || !strings.Contains(reported[0].Error(), info.ID) {
		t.Errorf("reported %v, want the close error once, naming the session", reported)
	}
}
