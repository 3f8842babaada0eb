package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// memBackend is an fsBackend that saves a box "whole" (MemoryBackend):
// its save keeps the workspace's file f as the image and ends the box;
// its restore starts a box holding the image as the file "memory", so a
// test tells a box restored from memory from one restored from files.
type memBackend struct {
	*fsBackend
	// restoreErr, if set, fails every restore; restoreErrAfter, if not
	// 0, every restore after that many; startErr, if set, every Start
	// but a restore's.
	restoreErr      error
	restoreErrAfter int32
	startErr        error
	// savesErr is what SavesMemory answers; saveErr, if set, fails every
	// save: one wrapping ErrCannotSave before it, else after the box
	// ended; afterSave, if set, is called with the saved image's path.
	savesErr  error
	saveErr   error
	afterSave func(dir string)
	// saving, if set, makes a save say so on it and wait for its ctx
	// (at most 10 s; stopped says ctx ended it), then fail as cut; or,
	// once savingGo is closed, go on with the save unless its ctx has
	// ended by then.
	saving   chan struct{}
	savingGo chan struct{}
	stopped  atomic.Bool
	// saves and restores count the saves and restores tried.
	saves, restores atomic.Int32
}

func (b *memBackend) SavesMemory(spec.Spec) error { return b.savesErr }

func (b *memBackend) Start(ctx context.Context, s spec.Spec) (Box, error) {
	if b.startErr != nil {
		return nil, b.startErr
	}
	return b.fsBackend.Start(ctx, s)
}

func (b *memBackend) SaveMemory(ctx context.Context, box Box, dir string) error {
	b.saves.Add(1)
	x := box.(*fsBox)
	if b.saving != nil && !b.awaitGo(ctx) {
		return errors.Join(fmt.Errorf("save stopped: %w", context.Cause(ctx)), x.Close())
	}
	switch {
	case errors.Is(b.saveErr, ErrCannotSave):
		return b.saveErr
	case b.saveErr != nil:
		return errors.Join(b.saveErr, x.Close()) // cut: the box ends
	}
	if b.afterSave != nil {
		defer b.afterSave(dir)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	image, err := os.ReadFile(filepath.Join(x.ws.Name(), "f"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "image"), image, 0o600); err != nil {
		return err
	}
	return x.Close() // a saved box ends with its save
}

// awaitGo says a save has started on b.saving and waits for its ctx, or
// savingGo, or 10 s: it says whether the save goes on.
func (b *memBackend) awaitGo(ctx context.Context) bool {
	b.saving <- struct{}{}
	select {
	case <-ctx.Done():
	case <-b.savingGo:
		if ctx.Err() == nil {
			return true
		}
	case <-time.After(10 * time.Second):
		return false
	}
	b.stopped.Store(true)
	return false
}

func (b *memBackend) RestoreMemory(ctx context.Context, s spec.Spec, dir string) (Box, error) {
	n := b.restores.Add(1)
	if b.restoreErr != nil {
		return nil, b.restoreErr
	}
	if b.restoreErrAfter > 0 && n > b.restoreErrAfter {
		return nil, errors.New("restore failed")
	}
	image, err := os.ReadFile(filepath.Join(dir, "image"))
	if err != nil {
		return nil, err
	}
	box, err := b.fsBackend.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	// Into the box Start made, not the backend's last: a fork restores
	// several at once.
	return box, os.WriteFile(filepath.Join(box.(*fsBox).ws.Name(), "memory"), image, 0o600)
}

// memSetup is a snapshot setup, a memBackend over its backend and a
// Manager over that, closed at the test's end: most memory tests' start.
func memSetup(t *testing.T) (*snapshotSetup, *memBackend, *Manager) {
	t.Helper()
	x := newSnapshotSetup(t)
	mb := &memBackend{fsBackend: x.b}
	return x, mb, memManager(t, x, mb, true)
}

// memManager is a Manager of x's store and snapshots over mb.
func memManager(t *testing.T, x *snapshotSetup, mb *memBackend, closeAtEnd bool) *Manager {
	t.Helper()
	m := NewManager(mb, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1})
	if closeAtEnd {
		t.Cleanup(func() { m.Close() })
	}
	return m
}

// TestMemorySnapshot: on a backend that saves boxes whole, a snapshot
// keeps the box's memory beside its files (Memory true, its size charged
// and recorded), a resume restores the box from it, and a fork of the
// snapshot restores each copy from it too; the snapshot's memory goes
// with it.
func TestMemorySnapshot(t *testing.T) {
	x, _, m := memSetup(t)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	got, err := m.Snapshot(ctx, "o", in.ID, memOn)
	if err != nil || got.Snapshot == nil || !got.Snapshot.Memory {
		t.Fatalf("Snapshot = %+v, %v; want memory", got.Snapshot, err)
	}
	x.store.mu.Lock()
	rec := x.store.records[in.ID]
	x.store.mu.Unlock()
	if rec.SnapshotMemoryBytes != int64(len("state")) {
		t.Errorf("record's memory bytes = %d, want %d", rec.SnapshotMemoryBytes, len("state"))
	}
	forks, err := m.Fork(ctx, "o", in.ID, 2, withMemory)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	for _, f := range forks {
		if f.State != StateReady {
			t.Errorf("fork %s: state %s, want ready", f.ID, f.State)
		}
	}
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	x.b.mu.Lock()
	boxes := slices.Clone(x.b.boxes[1:])
	x.b.mu.Unlock()
	if len(boxes) != 3 {
		t.Fatalf("boxes after two forks and a resume: %v, want three", boxes)
	}
	for _, p := range boxes {
		if got := readFileT(t, filepath.Join(p, "memory")); got != "state" {
			t.Errorf("box %s: memory %q, want it restored from the saved one", p, got)
		}
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshot directory after the resume: %v, want the snapshot and its memory gone", names)
	}
}

// TestMemoryRestoreFailsFilesResume: a resume whose memory restore fails
// resumes from the snapshot's files, a fresh box, as a files-only one.
func TestMemoryRestoreFailsFilesResume(t *testing.T) {
	x := newSnapshotSetup(t)
	mb := &memBackend{fsBackend: x.b, restoreErr: errors.New("runsc: bad image")}
	m := memManager(t, x, mb, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "files")
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	info, err := m.Resume(ctx, "o", in.ID)
	if err != nil || info.State != StateReady {
		t.Fatalf("Resume: %v, %v; want ready from the files", info.State, err)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "files" {
		t.Errorf("restored file: %q, want %q", got, "files")
	}
	if _, err := os.Stat(filepath.Join(x.b.last(), "memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a box resumed from files holds a memory marker (%v)", err)
	}
}

// TestMemorySnapshotCrashAtEachStep stops a memory snapshot at each step
// as a crash would: before the record the next server reports the
// session dead and sweeps the snapshot and its memory; after it, the
// session is snapshotted and resumes from its memory.
func TestMemorySnapshotCrashAtEachStep(t *testing.T) {
	for _, tc := range []struct {
		step string
		want State
	}{
		{"captured", StateDead},
		{"memory", StateDead},
		{"memory committed", StateDead},
		{"committed", StateDead},
		{"recorded", StateSnapshotted},
	} {
		t.Run(tc.step, func(t *testing.T) {
			x := newSnapshotSetup(t)
			mb := &memBackend{fsBackend: x.b}
			m := memManager(t, x, mb, false)
			ctx := context.Background()
			in := x.session(t, m, defaultOptions(), "f", "data")
			stepHook = func(s string) {
				if s == tc.step {
					runtime.Goexit() // the server stops here, cleaning nothing up
				}
			}
			t.Cleanup(func() { stepHook = nil })
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = m.Snapshot(ctx, "o", in.ID, memOn) // it never returns: the hook ends the goroutine
			}()
			<-done
			stepHook = nil
			m2 := memManager(t, x, mb, true)
			info, err := m2.Get(context.Background(), "o", in.ID)
			if err != nil || info.State != tc.want {
				t.Fatalf("after a crash at %s: state %s (%v), want %s", tc.step, info.State, err, tc.want)
			}
			names := snapshotNames(t, x.snaps)
			if tc.want != StateSnapshotted {
				if len(names) != 0 {
					t.Errorf("snapshot directory after restart: %v, want nothing left", names)
				}
				return
			}
			if len(names) != 2 || !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".mem") }) {
				t.Errorf("snapshot directory after restart: %v, want the snapshot and its memory", names)
			}
			if info.Snapshot == nil || !info.Snapshot.Memory {
				t.Errorf("revived snapshot %+v, want its memory", info.Snapshot)
			}
			resumeFromMemory(t, m2, x, in.ID, "data")
		})
	}
}

// resumeFromMemory resumes owner "o"'s session id and checks that the box
// it started was restored from the saved memory holding want.
func resumeFromMemory(t *testing.T, m *Manager, x *snapshotSetup, id, want string) {
	t.Helper()
	if _, err := m.Resume(context.Background(), "o", id); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "memory")); got != want {
		t.Errorf("resumed box's memory: %q, want %q", got, want)
	}
}

// TestMemorySnapshotRefusesBusySession: an exec in flight at a save
// would never get its result, so a snapshot while one runs is refused
// (ErrBusy, a 409), and the box is neither saved nor paused.
func TestMemorySnapshotRefusesBusySession(t *testing.T) {
	x := newSnapshotSetup(t)
	m := memManager(t, x, &memBackend{fsBackend: x.b}, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	s, err := m.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	box := s.box.(*fsBox)
	box.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "o", in.ID, ExecRequest{Command: []string{"sleep"}}, Stream{})
		done <- err
	}()
	if !waitUntil(func() bool { return s.currentState() == StateBusy }) {
		t.Fatal("the exec never started")
	}
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); !errors.Is(err, ErrBusy) {
		t.Errorf("Snapshot() during an exec = %v; want ErrBusy", err)
	}
	close(box.block)
	if err := <-done; err != nil {
		t.Errorf("Exec() = %v", err)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 || box.isPaused() {
		t.Errorf("after a refused snapshot: snapshots %v, paused %v; want none, running", names, box.isPaused())
	}
	if info, err := m.Get(context.Background(), "o", in.ID); err != nil || info.State != StateReady {
		t.Errorf("session after a refused snapshot: %v, %v; want ready", info.State, err)
	}
}

// TestSnapshotFilesOnlyOption: a snapshot that does not ask for memory
// (E2B's keepMemory:false, the API's "memory": false) keeps files only
// on a backend that could save the box whole: no .mem is written, and
// the resume restores the files into a fresh box.
func TestSnapshotFilesOnlyOption(t *testing.T) {
	x := newSnapshotSetup(t)
	m := memManager(t, x, &memBackend{fsBackend: x.b}, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "files")
	got, err := m.Snapshot(ctx, "o", in.ID, SnapshotOptions{Memory: false})
	if err != nil || got.Snapshot == nil || got.Snapshot.Memory {
		t.Fatalf("Snapshot(files only) = %+v, %v; want a snapshot without memory", got.Snapshot, err)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 1 || strings.HasSuffix(names[0], ".mem") {
		t.Errorf("snapshot directory: %v, want the files' snapshot alone", names)
	}
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(x.b.last(), "memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a files-only snapshot's resume holds a memory marker (%v)", err)
	}
}

// TestFilesOnlySnapshotsServer: a server that keeps snapshots to files
// (--snapshot-memory=false) saves no box's memory even when a snapshot
// asks for it (the API's default, every auto-snapshot), and forks a
// memory snapshot an earlier server run kept into files-only copies;
// that snapshot's own resume still restores the box whole.
func TestFilesOnlySnapshotsServer(t *testing.T) {
	x := newSnapshotSetup(t)
	mb := &memBackend{fsBackend: x.b}
	before := memManager(t, x, mb, false)
	ctx := context.Background()
	kept := x.session(t, before, defaultOptions(), "f", "kept")
	if got, err := before.Snapshot(ctx, "o", kept.ID, memOn); err != nil || !got.Snapshot.Memory {
		t.Fatalf("Snapshot before the flag = %+v, %v; want memory", got.Snapshot, err)
	}
	m := NewManager(mb, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 4, ExecPace: -1, StartRate: -1, FilesOnlySnapshots: true})
	t.Cleanup(func() { m.Close() })
	saves := mb.saves.Load()
	in := x.session(t, m, defaultOptions(), "f", "secret")
	got, err := m.Snapshot(ctx, "o", in.ID, memOn)
	if err != nil || got.Snapshot == nil || got.Snapshot.Memory {
		t.Fatalf("Snapshot(memory) on a files-only server = %+v, %v; want files only", got.Snapshot, err)
	}
	if n := mb.saves.Load() - saves; n != 0 {
		t.Errorf("files-only server tried %d saves of a box, want none", n)
	}
	forks, err := m.Fork(ctx, "o", kept.ID, 1, withMemory)
	if err != nil || len(forks) != 1 {
		t.Fatalf("Fork of the earlier memory snapshot = %v, %v", forks, err)
	}
	if _, err := os.Stat(filepath.Join(x.b.last(), "memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a files-only server's fork was restored from memory (%v), want files only", err)
	}
	resumeFromMemory(t, m, x, kept.ID, "kept")
}
