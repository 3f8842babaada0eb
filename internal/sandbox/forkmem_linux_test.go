package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wsOf is the workspace directory of session id's current box.
func wsOf(t *testing.T, m *Manager, id string) string {
	t.Helper()
	s, err := m.lookupCtx(context.Background(), "o", id)
	if err != nil {
		t.Fatal(err)
	}
	return s.currentBox().(*fsBox).ws.Name()
}

// memoryOf is the "memory" marker of session id's box (memBackend's
// restore writes it), or "" where its box was not restored from memory.
func memoryOf(t *testing.T, m *Manager, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wsOf(t, m, id), "memory"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForkLiveSourceKeepsMemory: on a backend that saves boxes whole, a
// fork of a running session copies its memory: the source is
// snapshotted with it, every fork restored from it, and the source
// restored from it after, running on; no snapshot slot and no snapshot
// are left.
func TestForkLiveSourceKeepsMemory(t *testing.T) {
	x, mb, m := memSetup(t)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	forks, err := m.Fork(ctx, "o", in.ID, 2, withMemory)
	if err != nil || len(forks) != 2 {
		t.Fatalf("Fork = %v, %v; want two forks", forks, err)
	}
	for _, f := range forks {
		if got := memoryOf(t, m, f.ID); got != "state" {
			t.Errorf("fork %s: memory %q, want it restored from the source's", f.ID, got)
		}
	}
	got, err := m.Get(ctx, "o", in.ID)
	if err != nil || got.State != StateReady {
		t.Fatalf("source after the fork: %v, %v; want ready", got.State, err)
	}
	if memoryOf(t, m, in.ID) != "state" {
		t.Error("running source was not restored from its saved memory")
	}
	if n := mb.saves.Load(); n != 1 {
		t.Errorf("saves: %d, want one", n)
	}
	if n := mb.restores.Load(); n != 3 {
		t.Errorf("restores: %d, want 3", n)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshot directory after the fork: %v, want empty", names)
	}
	if held := countsOf(m).snapshots; held != 0 {
		t.Errorf("snapshot slots held: %d, want none", held)
	}
}

// TestForkPausedSourceStaysPaused: a paused source is forked from its
// files, on a backend that saves boxes whole too, and stays paused in
// its own box, holding no snapshot slot after: with 2 snapshot slots, a
// fork of each of three paused sessions succeeds.
func TestForkPausedSourceStaysPaused(t *testing.T) {
	x, mb, m := memSetup(t)
	ctx := context.Background()
	for i := range 3 {
		in := x.session(t, m, defaultOptions(), "f", "state")
		box := wsOf(t, m, in.ID)
		if _, err := m.Pause(ctx, "o", in.ID); err != nil {
			t.Fatal(err)
		}
		forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
		if err != nil || len(forks) != 1 {
			t.Fatalf("fork of paused session %d = %v, %v; want one fork", i, forks, err)
		}
		if got := readFileT(t, filepath.Join(wsOf(t, m, forks[0].ID), "f")); got != "state" {
			t.Errorf("fork %d: file %q, want the source's", i, got)
		}
		got, err := m.Get(ctx, "o", in.ID)
		if err != nil || got.State != StatePaused {
			t.Fatalf("paused source %d after the fork: %v, %v; want paused", i, got.State, err)
		}
		if wsOf(t, m, in.ID) != box {
			t.Errorf("paused source %d not in its own box after the fork", i)
		}
		if held := countsOf(m).snapshots; held != 0 {
			t.Errorf("snapshot slots held after fork %d: %d, want none", i, held)
		}
	}
	if n := mb.saves.Load(); n != 0 {
		t.Errorf("saves: %d, want none", n)
	}
}

// TestForkLiveSourceFallsBackToFiles: a fork whose source's memory cannot
// be saved copies its files, as on any other backend, and never loses the
// source: refused before the save (the backend says no, or the save is
// refused), the source runs on in its own box, untouched; a save that
// ended the box leaves the source's files, which it resumes from.
func TestForkLiveSourceFallsBackToFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(*memBackend)
		saves   int32
		sameBox bool
		// warns is the warnings logged: one per failed save.
		warns int
	}{
		{"backend says no", func(b *memBackend) { b.savesErr = fmt.Errorf("%w: egress proxy", ErrCannotSave) }, 0, true, 0},
		{"save refused", func(b *memBackend) { b.saveErr = fmt.Errorf("%w: a spawn holds a host socket", ErrCannotSave) }, 1, true, 1},
		{"save failed after the cut", func(b *memBackend) { b.saveErr = errors.New("runsc checkpoint: killed") }, 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			mb := &memBackend{fsBackend: x.b}
			m := memManager(t, x, mb, true)
			ctx := context.Background()
			in := x.session(t, m, defaultOptions(), "f", "state")
			box := wsOf(t, m, in.ID)
			tc.set(mb)
			var log bytes.Buffer
			m.cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
			forks, err := m.Fork(ctx, "o", in.ID, 2, withMemory)
			if n := strings.Count(log.String(), "level=WARN"); n != tc.warns {
				t.Errorf("warnings: %d, want %d:\n%s", n, tc.warns, log.String())
			}
			if err != nil || len(forks) != 2 {
				t.Fatalf("Fork = %v, %v; want two forks", forks, err)
			}
			for _, f := range forks {
				if got := readFileT(t, filepath.Join(wsOf(t, m, f.ID), "f")); got != "state" {
					t.Errorf("fork %s: file %q, want the source's", f.ID, got)
				}
				if got := memoryOf(t, m, f.ID); got != "" {
					t.Errorf("fork %s: memory %q, want a fork of files", f.ID, got)
				}
			}
			got, err := m.Get(ctx, "o", in.ID)
			if err != nil || got.State != StateReady {
				t.Fatalf("source after the fork: %v, %v; want ready", got.State, err)
			}
			if same := wsOf(t, m, in.ID) == box; same != tc.sameBox {
				t.Errorf("source in its own box: %v, want %v", same, tc.sameBox)
			}
			if got := readFileT(t, filepath.Join(wsOf(t, m, in.ID), "f")); got != "state" {
				t.Errorf("source's file: %q, want it kept", got)
			}
			if n := mb.saves.Load(); n != tc.saves {
				t.Errorf("saves: %d, want %d", n, tc.saves)
			}
			if names := snapshotNames(t, x.snaps); len(names) != 0 {
				t.Errorf("snapshots after the fork: %v, want none", names)
			}
		})
	}
}

// TestForkLiveSourceBusy: a source running an exec is not saved for a
// fork, nor copied: the fork answers ErrBusy, as a fork of files does.
func TestForkLiveSourceBusy(t *testing.T) {
	x, mb, m := memSetup(t)
	in := x.session(t, m, defaultOptions(), "f", "state")
	s, err := m.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.state = StateBusy
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.state = StateReady
		s.mu.Unlock()
	}()
	if _, err := m.Fork(context.Background(), "o", in.ID, 1, withMemory); !errors.Is(err, ErrBusy) {
		t.Errorf("Fork of a busy session = %v, want ErrBusy", err)
	}
	if n := mb.saves.Load(); n != 0 {
		t.Errorf("saves: %d, want none", n)
	}
}

// TestForkFilesOnly: a fork asked for no memory copies files only, on a
// backend that saves boxes whole too: from a running source, which is
// never saved and runs on in its own box, and from a snapshot that kept
// its memory, which no copy is restored from.
func TestForkFilesOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot bool
		// wantState is the source's after the fork.
		wantState State
		saves     int32
	}{
		{"running", false, StateReady, 0},
		{"snapshot with memory", true, StateSnapshotted, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			mb := &memBackend{fsBackend: x.b}
			m := memManager(t, x, mb, true)
			ctx := context.Background()
			in := x.session(t, m, defaultOptions(), "f", "state")
			box := wsOf(t, m, in.ID)
			if tc.snapshot {
				if got, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil || got.Snapshot == nil || !got.Snapshot.Memory {
					t.Fatalf("Snapshot = %+v, %v; want memory", got.Snapshot, err)
				}
			}
			forks, err := m.Fork(ctx, "o", in.ID, 2, ForkOptions{})
			if err != nil || len(forks) != 2 {
				t.Fatalf("Fork = %v, %v; want two forks", forks, err)
			}
			for _, f := range forks {
				if got := readFileT(t, filepath.Join(wsOf(t, m, f.ID), "f")); got != "state" {
					t.Errorf("fork %s: file %q, want the source's", f.ID, got)
				}
				if got := memoryOf(t, m, f.ID); got != "" {
					t.Errorf("fork %s: memory %q, want files only", f.ID, got)
				}
			}
			if n := mb.saves.Load(); n != tc.saves {
				t.Errorf("saves: %d, want %d", n, tc.saves)
			}
			if n := mb.restores.Load(); n != 0 {
				t.Errorf("restores: %d, want none", n)
			}
			got, err := m.Get(ctx, "o", in.ID)
			if err != nil || got.State != tc.wantState {
				t.Fatalf("source after the fork: %v, %v; want %s", got.State, err, tc.wantState)
			}
			if !tc.snapshot && wsOf(t, m, in.ID) != box {
				t.Error("running source not in its own box after the fork")
			}
		})
	}
}

// counts is what owner "o" holds of m's caps: sessions and runs, bytes
// of the budget and snapshot slots.
type counts struct {
	sessions, snapshots int
	bytes               int64
}

func countsOf(m *Manager) counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return counts{sessions: m.byOwner["o"], snapshots: m.snapshots.byOwner["o"], bytes: m.bytesByOwner["o"]}
}

// TestForkLiveSourceKeepsRunSlot: a running source saved whole for a
// fork keeps its run slot and its charge through the fork, so the copies
// count beside it as a fork of files does: with a cap of 3 sessions per
// key a fork into 3 answers ErrTooMany and the source runs on; a fork
// into 2 leaves the source and its copies holding what three sessions
// hold, no snapshot slot; and a source whose resume fails stays
// snapshotted, having given its slot back.
func TestForkLiveSourceKeepsRunSlot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		count     int
		restoreOK bool
		wantErr   error
		wantState State
		// sessions are the key's sessions and runs after the fork.
		sessions int
	}{
		{"over the cap", 3, true, ErrTooMany, StateReady, 1},
		{"within the cap", 2, true, nil, StateReady, 3},
		{"source's resume fails", 2, false, nil, StateSnapshotted, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			mb := &memBackend{fsBackend: x.b}
			m := NewManager(mb, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1,
				MaxPerOwner: 3, MaxBytesPerOwner: 1 << 40})
			t.Cleanup(func() { m.Close() })
			ctx := context.Background()
			in := x.session(t, m, defaultOptions(), "f", "state")
			one := countsOf(m)
			if !tc.restoreOK {
				// The copies restore before the source does: fail its
				// restore only, and its files' restore after it.
				mb.restoreErrAfter, mb.startErr = int32(tc.count), errors.New("start failed")
			}
			forks, err := m.Fork(ctx, "o", in.ID, tc.count, withMemory)
			if !errors.Is(err, tc.wantErr) || (err == nil && len(forks) != tc.count) {
				t.Fatalf("Fork = %v, %v; want %d forks or %v", forks, err, tc.count, tc.wantErr)
			}
			got, err := m.Get(ctx, "o", in.ID)
			if err != nil || got.State != tc.wantState {
				t.Fatalf("source after the fork: %v, %v; want %s", got.State, err, tc.wantState)
			}
			after := countsOf(m)
			if after.sessions != tc.sessions {
				t.Errorf("sessions and runs held: %d, want %d", after.sessions, tc.sessions)
			}
			if tc.wantState == StateReady {
				if want := (counts{sessions: tc.sessions, bytes: one.bytes * int64(tc.sessions)}); after != want {
					t.Errorf("held after the fork: %+v, want %+v (one session holds %+v)", after, want, one)
				}
				if _, err := m.Exec(ctx, "o", in.ID, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
					t.Errorf("exec in the source after the fork: %v", err)
				}
			}
		})
	}
}

// TestForkCallerGoneKeepsSource: a fork's caller going away during the
// save of its running source does not cut the save short (which ends
// the box, its processes gone): the save runs to its end, the fork
// fails with the caller's context, and the source runs on, restored
// from its memory.
func TestForkCallerGoneKeepsSource(t *testing.T) {
	x := newSnapshotSetup(t)
	mb := &memBackend{fsBackend: x.b, saving: make(chan struct{}, 1), savingGo: make(chan struct{})}
	m := memManager(t, x, mb, true)
	in := x.session(t, m, defaultOptions(), "f", "state")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Fork(ctx, "o", in.ID, 2, withMemory)
		done <- err
	}()
	select {
	case <-mb.saving:
	case <-time.After(10 * time.Second):
		t.Fatal("the save never started")
	}
	cancel()
	close(mb.savingGo)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Fork whose caller went away = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the fork never ended")
	}
	if mb.stopped.Load() {
		t.Error("the caller's going away stopped the save")
	}
	got, err := m.Get(context.Background(), "o", in.ID)
	if err != nil || got.State != StateReady {
		t.Fatalf("source after the fork: %v, %v; want ready", got.State, err)
	}
	if memoryOf(t, m, in.ID) != "state" {
		t.Error("the source was not restored from its saved memory")
	}
	if c := countsOf(m); c.sessions != 1 || c.snapshots != 0 {
		t.Errorf("held after the fork: %+v, want the source's run slot alone", c)
	}
}

// TestForkHeldSourceRefusesPauseAndSnapshot: while a fork holds its
// running source snapshotted, to resume it once the copies are made, a
// Pause or Snapshot of the source answers ErrBusy rather than succeed
// and be undone by that resume; after the fork both work.
func TestForkHeldSourceRefusesPauseAndSnapshot(t *testing.T) {
	x, _, m := memSetup(t)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	var pauseErr, snapErr error
	var once sync.Once
	stepHook = func(s string) {
		if s == "fork reseeded" {
			once.Do(func() {
				_, pauseErr = m.Pause(ctx, "o", in.ID)
				_, snapErr = m.Snapshot(ctx, "o", in.ID, SnapshotOptions{})
			})
		}
	}
	t.Cleanup(func() { stepHook = nil })
	forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
	stepHook = nil
	if err != nil || len(forks) != 1 {
		t.Fatalf("Fork = %v, %v; want one fork", forks, err)
	}
	if !errors.Is(pauseErr, ErrBusy) || !errors.Is(snapErr, ErrBusy) {
		t.Errorf("Pause, Snapshot during the fork = %v, %v; want ErrBusy", pauseErr, snapErr)
	}
	if got, err := m.Get(ctx, "o", in.ID); err != nil || got.State != StateReady {
		t.Fatalf("source after the fork: %v, %v; want ready", got.State, err)
	}
	if got, err := m.Pause(ctx, "o", in.ID); err != nil || got.State != StatePaused {
		t.Errorf("Pause after the fork = %v, %v; want paused", got.State, err)
	}
}

// TestForkNoRoomCopiesFilesOnce: where the state directory has no room
// for the running source's image, the fork copies its files once, as a
// fork of files, with one warning, rather than snapshot them, drop them
// and copy them again.
func TestForkNoRoomCopiesFilesOnce(t *testing.T) {
	x, mb, m := memSetup(t)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	s, err := m.lookupCtx(ctx, "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.spec.Limits.MemoryBytes = 1 << 61
	s.mu.Unlock()
	var log bytes.Buffer
	m.cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var begun atomic.Int32
	stepHook = func(s string) {
		if s == "begun" {
			begun.Add(1)
		}
	}
	t.Cleanup(func() { stepHook = nil })
	forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
	stepHook = nil
	if err != nil || len(forks) != 1 {
		t.Fatalf("Fork = %v, %v; want one fork", forks, err)
	}
	if n := begun.Load(); n != 1 {
		t.Errorf("copies of the files begun: %d, want one", n)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 1 {
		t.Errorf("warnings: %d, want one:\n%s", n, log.String())
	}
	if n := mb.saves.Load(); n != 0 {
		t.Errorf("saves: %d, want none", n)
	}
	if got, err := m.Get(ctx, "o", in.ID); err != nil || got.State != StateReady {
		t.Fatalf("source after the fork: %v, %v; want ready", got.State, err)
	}
}
