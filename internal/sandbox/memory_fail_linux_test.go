package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestMemorySnapshotFallsBackToFiles: a memory save that is not asked
// of the backend, refused, failed, or whose image cannot be kept, leaves
// a snapshot of the session's files, never a failed snapshot or a lost
// session: Memory false, no .mem, snapshotted, and the resume restores
// the files into a fresh box. A refused save pauses the box again.
func TestMemorySnapshotFallsBackToFiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        func(*memBackend, *session)
		saves      int32
		pausedOnce bool
	}{
		{"backend says no", func(b *memBackend, _ *session) {
			b.savesErr = fmt.Errorf("%w: egress proxy", ErrCannotSave)
		}, 0, false},
		{"no room for the image", func(_ *memBackend, s *session) {
			s.mu.Lock()
			s.spec.Limits.MemoryBytes = 1 << 61
			s.mu.Unlock()
		}, 0, false},
		{"save refused", func(b *memBackend, _ *session) {
			b.saveErr = fmt.Errorf("%w: a spawn holds a host socket", ErrCannotSave)
		}, 1, true},
		{"save failed after the cut", func(b *memBackend, _ *session) {
			b.saveErr = errors.New("runsc checkpoint: killed")
		}, 1, false},
		{"image cannot be placed", func(b *memBackend, _ *session) {
			b.afterSave = func(dir string) {
				placed := filepath.Join(filepath.Dir(dir), strings.TrimPrefix(filepath.Base(dir), ".tmp-"), "x")
				if err := os.MkdirAll(placed, 0o700); err != nil {
					panic(err)
				}
			}
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			mb := &memBackend{fsBackend: x.b}
			m := memManager(t, x, mb, true)
			ctx := context.Background()
			in := x.session(t, m, defaultOptions(), "f", "state")
			s, err := m.lookupCtx(context.Background(), "o", in.ID)
			if err != nil {
				t.Fatal(err)
			}
			box := s.box.(*fsBox)
			tc.set(mb, s)
			got, err := m.Snapshot(ctx, "o", in.ID, memOn)
			if err != nil || got.State != StateSnapshotted || got.Snapshot == nil || got.Snapshot.Memory {
				t.Fatalf("Snapshot = %v %+v, %v; want snapshotted, files only", got.State, got.Snapshot, err)
			}
			if n := mb.saves.Load(); n != tc.saves {
				t.Errorf("saves tried: %d, want %d", n, tc.saves)
			}
			if tc.pausedOnce && !box.isPaused() {
				t.Error("a box whose save was refused was not paused again")
			}
			names := snapshotNames(t, x.snaps)
			if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, ".tmp-") }) {
				t.Errorf("snapshot directory: %v, want nothing unfinished", names)
			}
			if _, err := m.Resume(ctx, "o", in.ID); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "state" {
				t.Errorf("resumed file: %q, want %q", got, "state")
			}
			if _, err := os.Stat(filepath.Join(x.b.last(), "memory")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a files-only snapshot's resume holds a memory marker (%v)", err)
			}
		})
	}
}

// TestMemorySnapshotRecordFails: once the save has ended the box, a
// record that cannot be written must not cost the session its files:
// it stays snapshotted (its store error reported), its snapshot and
// memory kept, and resumes from its memory.
func TestMemorySnapshotRecordFails(t *testing.T) {
	x := newSnapshotSetup(t)
	st := &failSyncStore{fakeStore: x.store}
	var storeErrs []error
	m := NewManager(&memBackend{fsBackend: x.b}, Config{Store: st, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1,
		OnStoreError: func(err error) { storeErrs = append(storeErrs, err) }})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	st.mu.Lock()
	st.fail = true
	st.mu.Unlock()
	got, err := m.Snapshot(ctx, "o", in.ID, memOn)
	if err != nil || got.State != StateSnapshotted || got.Snapshot == nil || !got.Snapshot.Memory {
		t.Fatalf("Snapshot with a failing record = %v %+v, %v; want snapshotted with memory", got.State, got.Snapshot, err)
	}
	if len(storeErrs) != 1 {
		t.Errorf("store errors reported: %v, want the record's", storeErrs)
	}
	if info, err := m.Get(context.Background(), "o", in.ID); err != nil || info.State != StateSnapshotted {
		t.Fatalf("Get after: %v, %v; want snapshotted, not buried", info.State, err)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 2 {
		t.Errorf("snapshot directory: %v, want the snapshot and its memory", names)
	}
	st.mu.Lock()
	st.fail = false
	st.mu.Unlock()
	resumeFromMemory(t, m, x, in.ID, "state")
}

// TestUnrecordedMemoryNotRestored: a .mem beside a snapshot whose
// record names no memory (a files-only snapshot) is not restored: the
// resume is from the files.
func TestUnrecordedMemoryNotRestored(t *testing.T) {
	x := newSnapshotSetup(t)
	m := memManager(t, x, &memBackend{fsBackend: x.b}, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "files")
	if _, err := m.Snapshot(ctx, "o", in.ID, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	names := snapshotNames(t, x.snaps)
	if len(names) != 1 {
		t.Fatalf("snapshot directory: %v, want one snapshot", names)
	}
	planted := filepath.Join(x.snaps.Path(), names[0]+".mem")
	if err := os.Mkdir(planted, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFileT(t, filepath.Join(planted, "image"), "planted")
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(x.b.last(), "memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unrecorded memory image was restored (%v)", err)
	}
}

// TestMemoryRestoreTakesCopySlot: a resume from memory waits for one of
// the server's copy slots, as a files' restore does: with every slot
// taken it is busy, restoring nothing, and once one is free it restores.
func TestMemoryRestoreTakesCopySlot(t *testing.T) {
	x, mb, m := memSetup(t)
	in := x.session(t, m, defaultOptions(), "f", "state")
	if _, err := m.Snapshot(context.Background(), "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	for range maxCopies {
		m.copies <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := m.Resume(ctx, "o", in.ID); !errors.Is(err, ErrBusy) || mb.restores.Load() != 0 {
		t.Errorf("Resume with every copy slot taken: %v, %d restores; want ErrBusy, none", err, mb.restores.Load())
	}
	for range maxCopies {
		<-m.copies
	}
	if _, err := m.Resume(context.Background(), "o", in.ID); err != nil || mb.restores.Load() != 1 {
		t.Errorf("Resume: %v, %d restores; want one from memory", err, mb.restores.Load())
	}
}

// loadingBackend is a memBackend whose restored boxes go on loading
// their memory until loaded is closed (memoryLoader).
type loadingBackend struct {
	*memBackend
	loaded chan struct{}
}

func (b loadingBackend) Loaded(Box) <-chan struct{} { return b.loaded }

// TestMemoryLoadHoldsCopySlot: a resume whose box goes on loading its
// memory after the restore returned answers at once, but keeps its copy
// slot until the load is over, so no more images are read at once than
// there are slots.
func TestMemoryLoadHoldsCopySlot(t *testing.T) {
	x := newSnapshotSetup(t)
	lb := loadingBackend{memBackend: &memBackend{fsBackend: x.b}, loaded: make(chan struct{})}
	m := NewManager(lb, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1})
	t.Cleanup(func() { m.Close() })
	in := x.session(t, m, defaultOptions(), "f", "state")
	if _, err := m.Snapshot(context.Background(), "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resume(context.Background(), "o", in.ID); err != nil || lb.restores.Load() != 1 {
		t.Fatalf("Resume: %v, %d restores; want one from memory", err, lb.restores.Load())
	}
	if got := len(m.copies); got != 1 {
		t.Errorf("copy slots held while the memory loads: %d, want 1", got)
	}
	close(lb.loaded)
	for i := 0; len(m.copies) != 0; i++ {
		if i == 1000 {
			t.Fatal("the copy slot was not given back once the memory loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeleteStopsMemorySave: a Delete during a memory save cancels it
// (its context is the snapshot copy's, which the session's end stops)
// rather than waiting for it to end.
func TestDeleteStopsMemorySave(t *testing.T) {
	x := newSnapshotSetup(t)
	mb := &memBackend{fsBackend: x.b, saving: make(chan struct{}, 1)}
	m := memManager(t, x, mb, true)
	in := x.session(t, m, defaultOptions(), "f", "state")
	done := make(chan error, 1)
	go func() {
		_, err := m.Snapshot(context.Background(), "o", in.ID, memOn)
		done <- err
	}()
	select {
	case <-mb.saving:
	case <-time.After(10 * time.Second):
		t.Fatal("the save never started")
	}
	if err := m.Delete(context.Background(), "o", in.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Snapshot of a session deleted during its save = %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the snapshot never ended")
	}
	if !mb.stopped.Load() {
		t.Error("the save ran to its own end: the Delete did not cancel it")
	}
}

// TestForkHiddenUntilReseeded: a fork from memory has its interpreters
// adopted and reseeded before it is registered, so no List, Get or run
// can reach it (and make an interpreter its adoption would overwrite)
// before then.
func TestForkHiddenUntilReseeded(t *testing.T) {
	x, mb, m := memSetup(t)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "state")
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	stepHook = func(s string) {
		if s == "fork reseeded" {
			seen.Store(int32(len(m.List("o"))))
		}
	}
	t.Cleanup(func() { stepHook = nil })
	forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
	stepHook = nil
	if err != nil || len(forks) != 1 {
		t.Fatalf("Fork: %v, %v", forks, err)
	}
	if n := seen.Load(); n != 1 {
		t.Errorf("sessions listed when the fork was reseeded: %d, want the source alone", n)
	}
	if mb.restores.Load() != 1 {
		t.Errorf("restores: %d, want the fork's from memory", mb.restores.Load())
	}
}

// TestMemorySnapshotChargesImage: a memory snapshot whose image and
// files together outweigh the box's charge counts all of it against the
// owner's budget at once, as a restart would count it.
func TestMemorySnapshotChargesImage(t *testing.T) {
	x := newSnapshotSetup(t)
	big := 2 * (spec.DefaultLimits.MemoryBytes + spec.DefaultLimits.DiskBytes)
	mb := &memBackend{fsBackend: x.b, afterSave: func(dir string) {
		f, err := os.Create(filepath.Join(dir, "pages"))
		if err == nil {
			err = errors.Join(f.Truncate(big), f.Close()) // sparse: its size is what counts
		}
		if err != nil {
			panic(err)
		}
	}}
	m := NewManager(mb, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1, MaxBytesPerOwner: 1 << 50})
	t.Cleanup(func() { m.Close() })
	in := x.session(t, m, defaultOptions(), "f", "state")
	got, err := m.Snapshot(context.Background(), "o", in.ID, memOn)
	if err != nil || got.Snapshot == nil || !got.Snapshot.Memory {
		t.Fatalf("Snapshot = %+v, %v", got.Snapshot, err)
	}
	s, err := m.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	want := s.snapCharge()
	s.mu.Unlock()
	m.mu.Lock()
	charged := m.bytesByOwner["o"]
	m.mu.Unlock()
	if want <= big || charged != want {
		t.Errorf("owner charged %d after the snapshot, want its image and files, %d (> %d)", charged, want, big)
	}
}
