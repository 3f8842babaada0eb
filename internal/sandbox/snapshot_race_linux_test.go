package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stopAt makes the next snapshot step name wait for release, once it
// has closed reached.
func stopAt(t *testing.T, name string) (reached, release chan struct{}) {
	reached, release = make(chan struct{}), make(chan struct{})
	stepHook = func(s string) {
		if s == name {
			close(reached)
			<-release
		}
	}
	t.Cleanup(func() { stepHook = nil })
	return reached, release
}

// An exec that arrives while a snapshot copies the session's files waits
// for it and then resumes the session from the snapshot, rather than
// being told the session is gone.
func TestExecDuringSnapshotResumesIt(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in, err := m.Create(ctx, "o", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	writeFileT(t, filepath.Join(x.b.last(), "f"), "data")
	reached, release := stopAt(t, "captured")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID); snapDone <- err }()
	<-reached
	execDone := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "o", in.ID, ExecRequest{Command: []string{"true"}}, Stream{})
		execDone <- err
	}()
	// Time for the exec to reach the snapshot's lock; the checks below
	// hold whether it did or came after.
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-snapDone; err != nil {
		t.Fatalf("Snapshot() = %v; want nil", err)
	}
	if err := <-execDone; err != nil {
		t.Errorf("Exec() during the snapshot = %v; want nil (the session resumed from its snapshot)", err)
	}
	if got, _ := m.Get("o", in.ID); got.State != StateReady {
		t.Errorf("state after the exec = %s; want %s", got.State, StateReady)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "data" {
		t.Errorf("f after the resume = %q; want %q", got, "data")
	}
}

// A file call while a snapshot copies the files is refused with a retry,
// and a workspace opened before can no longer write: a write then would
// be missing from the snapshot and lost with the box.
func TestFilesDuringSnapshotRefused(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in, err := m.Create(ctx, "o", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	early, err := m.Files("o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	reached, release := stopAt(t, "begun")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID); snapDone <- err }()
	<-reached
	if _, err := m.Files("o", in.ID); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "retry") {
		t.Errorf("Files() during the copy = %v; want ErrBusy saying retry", err)
	}
	if _, err := early.Write("late.txt", strings.NewReader("late"), 0o644); err == nil {
		t.Errorf("a write through a workspace opened before the copy succeeded; want it refused")
	}
	close(release)
	if err := <-snapDone; err != nil {
		t.Fatalf("Snapshot() = %v; want nil", err)
	}
	dir, err := m.Files("o", in.ID)
	if err != nil {
		t.Fatalf("Files() after the snapshot = %v; want the resumed workspace", err)
	}
	if _, err := dir.Write("after.txt", strings.NewReader("x"), 0o644); err != nil {
		t.Errorf("Write() after the snapshot = %v; want nil", err)
	}
}
