package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// causeError is a box's end with a cause, as agent.Session reports it.
type causeError struct{ cause string }

func (e causeError) Error() string { return "the sandbox has ended: " + e.cause }
func (e causeError) Cause() string { return e.cause }

// TestExecNamesWhyItsSandboxDied: an exec during which the sandbox dies
// fails with the cause, in one clause, not only that the session ended,
// and as ErrDead (409): the session stays, dead.
func TestExecNamesWhyItsSandboxDied(t *testing.T) {
	m, b := newTestManager(t, Config{})
	info, s := sessionOf(t, m, "alice")
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
	err := <-done
	const want = "ended during the exec: its sandbox ended unexpectedly: its init ended (signal: killed)"
	if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), want) {
		t.Errorf("Exec() when the sandbox died = %v, want ErrDead saying %q", err, want)
	}
}

// TestDiedSessionAnswersDeadAtOnce: once a session's sandbox dies, the
// session answers as a dead one at once, long before the reaper's next
// round, whether or not its files are kept: Get says dead with the
// box's cause, and an exec fails with ErrDead (409) naming it. It stays
// dead, giving back its slot, until deleted.
func TestDiedSessionAnswersDeadAtOnce(t *testing.T) {
	m, b := newTestManager(t, Config{MaxSessions: 1, ReapEvery: time.Hour})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	box := s.box.(*fakeBox)
	const cause = "its init ended (signal: killed)"
	box.err = causeError{cause}
	_ = box.Close() // the sandbox dies on its own
	if got, err := m.Get(context.Background(), "alice", info.ID); err != nil || got.State != StateDead || !strings.Contains(got.Reason, cause) {
		t.Errorf("Get() right after the sandbox died = %+v, %v; want dead, the reason naming %q", got, err, cause)
	}
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}}, Stream{})
	if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), cause) {
		t.Errorf("Exec() right after the sandbox died = %v, want ErrDead naming %q", err, cause)
	}
	if _, err := m.SetNetwork(context.Background(), "alice", info.ID, []string{"example.org"}, nil); !errors.Is(err, ErrDead) {
		t.Errorf("SetNetwork() right after the sandbox died = %v, want ErrDead", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.alive() > 0 || m.Counts()[StateDead] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the dead session was not buried: counts %v", m.Counts())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("Create() after the only session died = %v; the dead one must give back its slot", err)
	}
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}}, Stream{})
	var dead *DeadError
	if !errors.As(err, &dead) || dead.FilesKept || !strings.Contains(err.Error(), "nothing of it is left") {
		t.Errorf("Exec() in the buried session = %v, want a DeadError without FilesKept saying nothing is left", err)
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Errorf("Delete() of the dead session = %v", err)
	}
	if _, err := m.Get(context.Background(), "alice", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get() after Delete() = %v, want ErrNotFound", err)
	}
}
