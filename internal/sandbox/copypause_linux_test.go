package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestCopyPauseLeavesUsersPause: a snapshot's failed copy and a fork's
// copy (of files, or of a memory fork's snapshot) resume the running
// session they paused, but never one its user (or auto-pause) paused
// meanwhile, in any order, and the run, paused and snapshot slots are
// right after each (issue 22). Each action runs
// at a step of the copy: "copy paused" (paused, copy not begun), "begun"
// (copying, the pause lock held: the action then runs in a goroutine,
// blocked until the copy ends, and is waited for at step join) or "undo
// copy pause" (after the copy, before its undo).
func TestCopyPauseLeavesUsersPause(t *testing.T) {
	type env struct {
		m  *Manager
		s  *session
		id string
	}
	pause := func(t *testing.T, e env) {
		if _, err := e.m.Pause(context.Background(), "o", e.id); err != nil {
			t.Errorf("Pause() = %v", err)
		}
	}
	resume := func(t *testing.T, e env) {
		if _, err := e.m.Resume(context.Background(), "o", e.id); err != nil {
			t.Errorf("Resume() = %v", err)
		}
	}
	autoPause := func(t *testing.T, e env) {
		if end := e.m.autoPause(e.s); end {
			t.Error("autoPause() = end; want paused, or left for the next round")
		}
	}
	for _, tc := range []struct {
		name string
		// at is the copy's step at which act runs; "" runs it before
		// the copy. With join set, act runs in a goroutine from at and
		// is waited for at step join.
		at, join string
		act      func(*testing.T, env)
		// forkErr is the error a fork of the source answers.
		forkErr error
		// full fills --max-paused (1) with another paused session first.
		full bool
		// want is the source's state after ("" for deleted or shut
		// down), active and paused the run and paused slots taken in all.
		want           State
		active, paused int
	}{
		{name: "no other call", want: StateReady, active: 1},
		{name: "pause before the call", act: pause, want: StatePaused, paused: 1},
		{name: "pause before the copy", at: "copy paused", act: pause, want: StatePaused, paused: 1},
		{name: "info says copy paused, then the user's pause", at: "copy paused", act: func(t *testing.T, e env) {
			copied, err := e.m.Get(context.Background(), "o", e.id)
			if err != nil || copied.State != StatePaused || !copied.CopyPaused {
				t.Errorf("Get() in the copy pause = %s, copy paused %v, %v; want %s, true", copied.State, copied.CopyPaused, err, StatePaused)
			}
			pause(t, e)
			got, err := e.m.Get(context.Background(), "o", e.id)
			if err != nil || got.CopyPaused || !got.PausedAt.After(copied.PausedAt) {
				t.Errorf("Get() after the user's pause: copy paused %v, paused at %v (the copy's %v), %v; want false, later", got.CopyPaused, got.PausedAt, copied.PausedAt, err)
			}
		}, want: StatePaused, paused: 1},
		{name: "resume before the copy", at: "copy paused", act: resume, forkErr: ErrBusy, want: StateReady, active: 1},
		{name: "pause while the copy holds the lock", at: "begun", join: "undo copy pause", act: pause, want: StatePaused, paused: 1},
		{name: "pause after the copy, before its undo", at: "undo copy pause", act: pause, want: StatePaused, paused: 1},
		{name: "auto-pause after the copy, before its undo", at: "undo copy pause", act: autoPause, want: StatePaused, paused: 1},
		{name: "auto-pause at the paused cap after the copy", at: "undo copy pause", full: true, act: autoPause, want: StateReady, active: 1, paused: 1},
		{name: "pause at the paused cap after the copy", at: "undo copy pause", full: true, act: func(t *testing.T, e env) {
			if _, err := e.m.Pause(context.Background(), "o", e.id); !errors.Is(err, ErrTooMany) {
				t.Errorf("Pause() at the cap = %v; want ErrTooMany", err)
			}
		}, want: StateReady, active: 1, paused: 1},
		{name: "resume after the copy, before its undo", at: "undo copy pause", act: resume, want: StateReady, active: 1},
		{name: "exec after the copy, before its undo", at: "undo copy pause", act: func(t *testing.T, e env) {
			if _, err := e.m.Exec(context.Background(), "o", e.id, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
				t.Errorf("Exec() = %v", err)
			}
		}, want: StateReady, active: 1},
		{name: "resume and pause after the copy, before its undo", at: "undo copy pause", act: func(t *testing.T, e env) {
			resume(t, e)
			pause(t, e)
		}, want: StatePaused, paused: 1},
		{name: "shutdown while the copy holds the lock", at: "begun", join: "undo copy pause", act: func(t *testing.T, e env) {
			e.m.Close()
		}, forkErr: ErrClosed},
		{name: "kill during the copy", at: "begun", act: func(t *testing.T, e env) {
			if err := e.m.Delete(context.Background(), "o", e.id); err != nil {
				t.Errorf("Delete() = %v", err)
			}
		}},
	} {
		for _, kind := range []string{"snapshot", "fork", "memory fork"} {
			if kind == "memory fork" && (tc.at == "undo copy pause" || tc.join == "undo copy pause") {
				// A memory fork's copy ends snapshotted, held for the
				// fork, not in an undo: a Pause then answers 409
				// (TestForkHeldSourceRefusesPauseAndSnapshot).
				continue
			}
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				x := newSnapshotSetup(t)
				var b Backend = x.b
				if kind == "memory fork" {
					b = &memBackend{fsBackend: x.b}
				}
				m := NewManager(b, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, MaxPaused: 1, ExecPace: -1, StartRate: -1})
				t.Cleanup(func() { m.Close() })
				ctx := context.Background()
				if tc.full {
					other := x.session(t, m, defaultOptions(), "", "")
					if _, err := m.Pause(ctx, "o", other.ID); err != nil {
						t.Fatal(err)
					}
				}
				in, s := sessionOf(t, m, "o")
				e := env{m: m, s: s, id: in.ID}
				var once, fail sync.Once
				joined := make(chan struct{})
				stepHook = func(name string) {
					if name == tc.at && tc.act != nil {
						once.Do(func() {
							if tc.join == "" {
								tc.act(t, e)
								return
							}
							go func() {
								defer close(joined)
								tc.act(t, e)
							}()
						})
					}
					if name == tc.join {
						waitJoined(t, joined)
					}
					if name == "begun" && kind == "snapshot" {
						// The snapshot's copy fails: its directory is gone.
						fail.Do(func() { removeEntries(t, x.snaps.Path()) })
					}
				}
				t.Cleanup(func() { stepHook = nil })
				if tc.at == "" && tc.act != nil {
					tc.act(t, e)
				}
				switch kind {
				case "snapshot":
					if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err == nil {
						t.Fatal("Snapshot() = nil; want the failed copy's error")
					}
				default:
					forks, err := m.Fork(ctx, "o", in.ID, 1, ForkOptions{Memory: kind == "memory fork"})
					switch {
					case tc.forkErr != nil && !errors.Is(err, tc.forkErr):
						t.Fatalf("Fork() = %v; want %v", err, tc.forkErr)
					case tc.forkErr == nil && err != nil && tc.want != "":
						t.Fatalf("Fork() = %v", err)
					}
					for _, f := range forks {
						if err := m.Delete(ctx, "o", f.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
				stepHook = nil
				got, err := m.Get(ctx, "o", in.ID)
				if tc.want == "" {
					if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
						t.Errorf("Get() after the kill or shutdown = %v, %v; want ErrNotFound or ErrClosed", got.State, err)
					}
				} else if err != nil || got.State != tc.want {
					t.Errorf("state after the %s = %v, %v; want %s", kind, got.State, err, tc.want)
				}
				m.mu.Lock()
				active, paused, snaps := m.active, m.paused.n, m.snapshots.n
				m.mu.Unlock()
				if active != tc.active || paused != tc.paused || snaps != 0 {
					t.Errorf("slots taken after the %s: %d run, %d paused, %d snapshot; want %d, %d, 0", kind, active, paused, snaps, tc.active, tc.paused)
				}
			})
		}
	}
}

// waitJoined waits for a test's action in a goroutine to end, bounded.
func waitJoined(t *testing.T, joined <-chan struct{}) {
	select {
	case <-joined:
	case <-time.After(30 * time.Second):
		t.Error("the action during the copy did not end in 30s")
	}
}

// removeEntries removes everything in dir, failing a copy under way there.
func removeEntries(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Error(err)
		}
	}
}

// TestConcurrentForksShareCopyPause: two forks of a running session at
// once share its copy pause, and the first to end leaves it paused for
// the other's copy, which succeeds; the last resumes it.
func TestConcurrentForksShareCopyPause(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "data")
	var mu sync.Mutex
	paused := 0
	bReached, bGo, bDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var bForks []Info
	stepHook = func(name string) {
		if name != "copy paused" {
			return
		}
		mu.Lock()
		paused++
		n := paused
		mu.Unlock()
		switch n {
		case 1: // the first fork, paused: the second joins its pause
			go func() {
				var err error
				bForks, err = m.Fork(ctx, "o", in.ID, 1, ForkOptions{})
				bDone <- err
			}()
			<-bReached
		case 2: // the second waits for the first fork to end
			close(bReached)
			<-bGo
		}
	}
	t.Cleanup(func() { stepHook = nil })
	aForks, err := m.Fork(ctx, "o", in.ID, 1, ForkOptions{})
	if err != nil {
		t.Fatalf("first Fork() = %v", err)
	}
	if got, _ := m.Get(ctx, "o", in.ID); got.State != StatePaused {
		t.Errorf("source after the first fork, the second copying = %s; want %s", got.State, StatePaused)
	}
	close(bGo)
	if err := <-bDone; err != nil {
		t.Fatalf("second Fork() = %v; want nil (its copy shares the pause)", err)
	}
	stepHook = nil
	for _, f := range append(aForks, bForks...) {
		if err := m.Delete(ctx, "o", f.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := m.Get(ctx, "o", in.ID); got.State != StateReady {
		t.Errorf("source after both forks = %s; want %s", got.State, StateReady)
	}
	m.mu.Lock()
	active, pausedSlots := m.active, m.paused.n
	m.mu.Unlock()
	if active != 1 || pausedSlots != 0 {
		t.Errorf("slots taken after both forks: %d run, %d paused; want 1, 0", active, pausedSlots)
	}
}

// TestSnapshotJoinsForksCopyPause: a snapshot of a session paused for a
// fork's copy joins that pause, and its failed copy leaves the session
// paused for the fork, whose copy then succeeds; the fork's end resumes
// it. The pause's hold count is shared by a snapshot and a fork alike.
func TestSnapshotJoinsForksCopyPause(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "data")
	snapped, failed := false, false // the hook runs in the fork's goroutine only
	stepHook = func(name string) {
		switch {
		case name == "copy paused" && !snapped:
			snapped = true
			if _, err := m.Snapshot(ctx, "o", in.ID, SnapshotOptions{}); err == nil {
				t.Error("Snapshot() = nil; want the failed copy's error")
			}
			if got, err := m.Get(ctx, "o", in.ID); err != nil || got.State != StatePaused || !got.CopyPaused {
				t.Errorf("source after the failed snapshot = %s, copy paused %v, %v; want %s for the fork's copy", got.State, got.CopyPaused, err, StatePaused)
			}
		case name == "begun" && !failed:
			failed = true
			removeEntries(t, x.snaps.Path()) // the snapshot's copy fails
		}
	}
	t.Cleanup(func() { stepHook = nil })
	forks, err := m.Fork(ctx, "o", in.ID, 1, ForkOptions{})
	if err != nil {
		t.Fatalf("Fork() = %v; want nil (the snapshot's failure leaves the fork's pause)", err)
	}
	stepHook = nil
	for _, f := range forks {
		if err := m.Delete(ctx, "o", f.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := m.Get(ctx, "o", in.ID); got.State != StateReady {
		t.Errorf("source after the fork = %s; want %s", got.State, StateReady)
	}
	m.mu.Lock()
	active, paused, snaps := m.active, m.paused.n, m.snapshots.n
	m.mu.Unlock()
	if active != 1 || paused != 0 || snaps != 0 {
		t.Errorf("slots taken after: %d run, %d paused, %d snapshot; want 1, 0, 0", active, paused, snaps)
	}
}
