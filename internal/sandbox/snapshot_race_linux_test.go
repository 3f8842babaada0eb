package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
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
	in := x.session(t, m, defaultOptions(), "f", "data")
	reached, release := stopAt(t, "captured")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); snapDone <- err }()
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
	if got, _ := m.Get(context.Background(), "o", in.ID); got.State != StateReady {
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
	in := x.session(t, m, defaultOptions(), "", "")
	early, err := m.Files(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	reached, release := stopAt(t, "begun")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); snapDone <- err }()
	<-reached
	if _, err := m.Files(context.Background(), "o", in.ID); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "retry") {
		t.Errorf("Files() during the copy = %v; want ErrBusy saying retry", err)
	}
	if _, err := early.Write("late.txt", strings.NewReader("late"), 0o644); err == nil {
		t.Errorf("a write through a workspace opened before the copy succeeded; want it refused")
	}
	close(release)
	if err := <-snapDone; err != nil {
		t.Fatalf("Snapshot() = %v; want nil", err)
	}
	dir, err := m.Files(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatalf("Files() after the snapshot = %v; want the resumed workspace", err)
	}
	if _, err := dir.Write("after.txt", strings.NewReader("x"), 0o644); err != nil {
		t.Errorf("Write() after the snapshot = %v; want nil", err)
	}
}

// A file call after the copy ended but before the snapshot is recorded
// is refused with a retry too: a write accepted then would go to the box
// about to close and be lost.
func TestFilesAfterCopyBeforeRecordRefused(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "", "")
	reached, release := stopAt(t, "committed")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); snapDone <- err }()
	<-reached
	dir, ferr := m.Files(context.Background(), "o", in.ID)
	werr := ferr
	if ferr == nil {
		_, werr = dir.Write("late.txt", strings.NewReader("late"), 0o644)
	}
	close(release)
	if err := <-snapDone; err != nil {
		t.Fatalf("Snapshot() = %v; want nil", err)
	}
	if !errors.Is(ferr, ErrBusy) || !strings.Contains(ferr.Error(), "retry") {
		t.Errorf("Files() between the copy and the record = %v; want ErrBusy saying retry", ferr)
	}
	if werr != nil {
		return
	}
	d2, err := m.Files(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatalf("Files() after the snapshot = %v", err)
	}
	if _, _, err := d2.Read("late.txt"); err != nil {
		t.Errorf("late.txt, whose write succeeded during the snapshot, is lost: %v", err)
	}
}

// A snapshot whose copy fails leaves a running session running even at
// capacity: its pause for the copy kept its run slot, which a Create
// meanwhile could not take.
func TestSnapshotFailureAtCapacityResumes(t *testing.T) {
	x := newSnapshotSetup(t)
	m := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, MaxSessions: 1, MaxPaused: 1, ExecPace: -1, StartRate: -1})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "d/f", "data")
	var createErr error
	stepHook = func(s string) {
		if s != "begun" {
			return
		}
		_, createErr = m.Create(ctx, "o", defaultOptions())
		// The copy fails: its temporary directory is gone.
		entries, _ := os.ReadDir(x.snaps.Path())
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(x.snaps.Path(), e.Name()))
		}
	}
	t.Cleanup(func() { stepHook = nil })
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err == nil {
		t.Fatal("Snapshot() = nil; want the failed copy's error")
	}
	if !errors.Is(createErr, ErrTooMany) {
		t.Errorf("Create() during the copy = %v; want ErrTooMany (the session kept its run slot)", createErr)
	}
	got, _ := m.Get(context.Background(), "o", in.ID)
	m.mu.Lock()
	active, paused := m.active, m.paused.n
	m.mu.Unlock()
	if got.State != StateReady || active != 1 || paused != 0 {
		t.Errorf("after the failed snapshot: state %s, %d run and %d paused slots taken; want %s, 1, 0", got.State, active, paused, StateReady)
	}
}

// An auto-snapshot that fails on the sandbox's own files (a sparse file
// over its disk limit) ends the idle session rather than retrying every
// round; a path too long to keep is skipped, and the snapshot made.
func TestAutoSnapshotHostileContent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, ws string)
		end   bool
	}{
		{"sparse file over disk", func(t *testing.T, ws string) {
			f, err := os.Create(filepath.Join(ws, "zzz-sparse"))
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(f.Truncate(1<<40), f.Close()); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"path over PATH_MAX", func(t *testing.T, ws string) {
			fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.Repeat("d", 250)
			for range 20 {
				if err := unix.Mkdirat(fd, name, 0o755); err != nil {
					t.Fatal(err)
				}
				next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
				unix.Close(fd)
				if err != nil {
					t.Fatal(err)
				}
				fd = next
			}
			unix.Close(fd)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			m := x.manager(t, true)
			o := defaultOptions()
			o.AutoSnapshot = true
			in, err := m.Create(context.Background(), "o", o)
			if err != nil {
				t.Fatal(err)
			}
			writeFileT(t, filepath.Join(x.b.last(), "aaa-data"), "data")
			tc.plant(t, x.b.last())
			s, err := m.lookupCtx(context.Background(), "o", in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.autoPause(s); got != tc.end {
				info, _ := m.Get(context.Background(), "o", in.ID)
				t.Errorf("autoPause() = %v (state %s); want %v", got, info.State, tc.end)
			}
			if !tc.end {
				if info, _ := m.Get(context.Background(), "o", in.ID); info.State != StateSnapshotted {
					t.Errorf("state = %s; want %s", info.State, StateSnapshotted)
				}
			}
		})
	}
}

// A Delete during a snapshot's copy stops the copy and leaves no
// snapshot behind.
func TestDeleteStopsSnapshotCopy(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "data")
	reached, release := stopAt(t, "begun")
	snapDone := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); snapDone <- err }()
	<-reached
	delDone := make(chan error, 1)
	go func() { delDone <- m.Delete(ctx, "o", in.ID) }()
	// The Delete marks the session ending (which cancels the copy) before
	// it waits on anything; let it get there.
	s, _ := m.lookupCtx(context.Background(), "o", in.ID)
	for i := 0; i < 10000 && s != nil && s.currentState() != StateStopping && s.currentState() != StateGone; i++ {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-snapDone; !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
		t.Errorf("Snapshot() during a Delete = %v; want it stopped", err)
	}
	if err := <-delDone; err != nil {
		t.Errorf("Delete() = %v", err)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots left after the Delete: %v", names)
	}
}

// A session's env, which may hold keys, is in its record only while it
// is snapshotted (a next server starts its box from it).
func TestEnvRecordedOnlyWhileSnapshotted(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, withEnv(defaultOptions(), "OPENAI_API_KEY=sk-secret"), "", "")
	env := func() []string {
		x.store.mu.Lock()
		defer x.store.mu.Unlock()
		return x.store.records[in.ID].Env
	}
	if got := env(); len(got) != 0 {
		t.Errorf("record of a running session holds env %q; want none", got)
	}
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	if got := env(); len(got) != 1 {
		t.Errorf("record of a snapshotted session holds env %q; want the session's", got)
	}
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	if got := env(); len(got) != 0 {
		t.Errorf("record of a resumed session holds env %q; want none", got)
	}
}

// A SetNetwork while a snapshotted session resumes is not lost: the new
// box enforces the rules the session reports.
func TestSetNetworkDuringResume(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	o := defaultOptions()
	o.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"old.example"}}
	in := x.snapshotted(t, m, o)
	setDone := make(chan error, 1)
	x.b.beforeStart = func() {
		go func() {
			_, err := m.SetNetwork(context.Background(), "o", in.ID, []string{"new.example"}, nil)
			setDone <- err
		}()
		// Time for the SetNetwork to reach the resume's lock; the checks
		// hold whether it did or came after.
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-setDone; err != nil {
		t.Fatalf("SetNetwork() = %v", err)
	}
	info, _ := m.Get(context.Background(), "o", in.ID)
	s, err := m.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.currentBox().(*fsBox).allowed(); len(got) != 1 || got[0] != info.Network.Allow[0] || got[0] != "new.example" {
		t.Errorf("box enforces allow %v, session reports %v; want both [new.example]", got, info.Network.Allow)
	}
}

// A snapshot of empty directories is charged for its entries against
// its owner's budget: they take the host's inodes and blocks all the same.
// The next server charges them too (the record keeps the count).
func TestSnapshotChargesEntries(t *testing.T) {
	x := newSnapshotSetup(t)
	cfg := Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 8, ExecPace: -1, StartRate: -1, MaxBytesPerOwner: 1 << 40}
	m := NewManager(x.b, cfg)
	t.Cleanup(func() { m.Close() })
	in, err := m.Create(context.Background(), "o", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	const dirs = 300
	for i := range dirs {
		if err := os.Mkdir(filepath.Join(x.b.last(), "d"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Snapshot(context.Background(), "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	want := int64(dirs * snapshot.EntryCost)
	if got := ownerBytes(m, "o"); got != want {
		t.Errorf("budget held by a snapshot of %d empty directories = %d; want %d", dirs, got, want)
	}
	m.Close()
	m2 := NewManager(x.b, cfg)
	t.Cleanup(func() { m2.Close() })
	if got := ownerBytes(m2, "o"); got != want {
		t.Errorf("budget held by the same snapshot after a restart = %d; want %d", got, want)
	}
}

func ownerBytes(m *Manager, owner string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytesByOwner[owner]
}

// Snapshot copies wait for one of the server's copy slots; one whose
// context ends first fails and leaves the session running.
func TestSnapshotWaitsForCopySlot(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	in, err := m.Create(context.Background(), "o", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range maxCopies {
		m.copies <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); done <- err }()
	s, err := m.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10000 && !s.isCopying(); i++ {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Snapshot() with every copy slot taken = %v; want context.Canceled", err)
	}
	if got, _ := m.Get(context.Background(), "o", in.ID); got.State != StateReady {
		t.Errorf("state = %s; want %s", got.State, StateReady)
	}
	for range maxCopies {
		<-m.copies
	}
}

// An auto-snapshot whose wait for a copy slot runs out (another key's
// copies hold them all) is busy: the session is left for the reaper's
// next round, not ended as idle with its files.
func TestAutoSnapshotCopySlotWaitRetries(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	in, s := sessionOf(t, m, "o")
	for range maxCopies {
		m.copies <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := m.snapshot(ctx, s, memOn)
	for range maxCopies {
		<-m.copies
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("snapshot() with every copy slot taken past its wait = %v; want ErrBusy and DeadlineExceeded", err)
	}
	if autoPauseEnds(true, err) {
		t.Errorf("autoPauseEnds(auto-snapshot, %v) = true; want false (retry the next round)", err)
	}
	if got, _ := m.Get(context.Background(), "o", in.ID); got.State != StateReady {
		t.Errorf("state = %s; want %s", got.State, StateReady)
	}
}

func (s *session) isCopying() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copying
}

// A template session snapshotted, revived by a new server and resumed
// runs on its template's root again, and its spec names that root.
func TestResumeAfterRestartKeepsTemplateRoot(t *testing.T) {
	x := newSnapshotSetup(t)
	ts := newFakeTemplates(pyRoot(t))
	cfg := Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1, Templates: ts}
	m := NewManager(x.b, cfg)
	ctx := context.Background()
	o := defaultOptions()
	o.Template = "py"
	in := x.snapshotted(t, m, o)
	m.Close()
	m2 := NewManager(x.b, cfg)
	t.Cleanup(func() { m2.Close() })
	if _, err := m2.Resume(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	s, err := m2.lookupCtx(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	got := s.spec.Root.Dir
	s.mu.Unlock()
	if want := ts.roots["py"].Dir; got != want {
		t.Errorf("resumed session's root = %q; want the template's %q", got, want)
	}
}

// A snapshotted session whose limits a new server's ceilings refuse
// comes back dead, saying why, rather than snapshotted.
func TestRevivedOverCeilingsIsDead(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, false)
	o := defaultOptions()
	o.Limits.MemoryBytes = 512 << 20
	in := x.snapshotted(t, m, o)
	m.Close()
	m2 := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1,
		Ceilings: spec.Ceilings{MemoryBytes: 256 << 20}})
	t.Cleanup(func() { m2.Close() })
	got, err := m2.Get(context.Background(), "o", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateDead || !strings.Contains(got.Reason, "not allowed on this server") {
		t.Errorf("revived over the ceilings: state %s, reason %q; want dead saying its limits are not allowed", got.State, got.Reason)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots left: %v; want it swept", names)
	}
}

// A resume from a snapshot that fails after the session was deleted
// meanwhile puts nothing back on its owner's budget.
func TestResumeFailAfterDeleteHoldsNothing(t *testing.T) {
	x := newSnapshotSetup(t)
	m := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 8, ExecPace: -1, StartRate: -1, MaxBytesPerOwner: 1 << 40})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "", "")
	writeFileT(t, filepath.Join(x.b.last(), "f"), strings.Repeat("x", 4096))
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	x.b.beforeStart = func() {
		close(started)
		<-release
	}
	done := make(chan error, 1)
	go func() { _, err := m.Resume(ctx, "o", in.ID); done <- err }()
	<-started
	if err := m.Delete(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err == nil {
		t.Errorf("Resume() of a session deleted meanwhile = nil; want an error")
	}
	m.mu.Lock()
	left, held := m.bytesByOwner["o"], m.held[in.ID]
	m.mu.Unlock()
	if left != 0 || held != 0 {
		t.Errorf("after the delete: the key holds %d bytes, the session %d; want 0, 0", left, held)
	}
}

// failSyncStore fails every fsync'd save while fail is set.
type failSyncStore struct {
	*fakeStore
	fail bool
}

func (f *failSyncStore) SaveSessionSync(s state.Session) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("disk failed")
	}
	return f.fakeStore.SaveSessionSync(s)
}

// A resume whose record cannot be written keeps the snapshot the record
// still names, and the session's end drops it.
func TestResumeSaveFailureDropsSnapshotAtEnd(t *testing.T) {
	x := newSnapshotSetup(t)
	st := &failSyncStore{fakeStore: x.store}
	var storeErrs []error
	m := NewManager(x.b, Config{Store: st, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1,
		OnStoreError: func(err error) { storeErrs = append(storeErrs, err) }})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	in := x.snapshotted(t, m, defaultOptions())
	st.mu.Lock()
	st.fail = true
	st.mu.Unlock()
	if _, err := m.Resume(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	if len(storeErrs) == 0 {
		t.Errorf("a resume whose record failed reported no store error")
	}
	if names := snapshotNames(t, x.snaps); len(names) != 1 {
		t.Errorf("snapshots after the failed record: %v; want the one it names kept", names)
	}
	if err := m.Delete(ctx, "o", in.ID); err != nil {
		t.Fatal(err)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots after the delete: %v; want none", names)
	}
}

// A Delete of a snapshotted source while it is forked leaves the fork
// its files: the fork pins the snapshot, which goes once the fork ends.
func TestForkPinsSourceSnapshot(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	o := defaultOptions()
	o.AutoSnapshot = true
	in := x.session(t, m, o, "f", "forked")
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	var delErr error
	x.b.beforeStart = func() { delErr = m.Delete(ctx, "o", in.ID) }
	forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
	if err != nil {
		t.Fatalf("Fork() with its source deleted meanwhile = %v; want the fork made", err)
	}
	if delErr != nil {
		t.Errorf("Delete() during the fork = %v", delErr)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "forked" {
		t.Errorf("the fork's f = %q; want %q", got, "forked")
	}
	if !forks[0].AutoSnapshot {
		t.Errorf("fork's AutoSnapshot = false; want the source's true")
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots after the fork: %v; want the deleted source's gone", names)
	}
}

// A fork of a running session holds a snapshot slot and the snapshot's
// charge while it copies, and gives both back.
func TestForkGivesBackSlotAndBudget(t *testing.T) {
	x := newSnapshotSetup(t)
	m := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 1, ExecPace: -1, StartRate: -1, MaxBytesPerOwner: 1 << 40})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "data")
	counts := func() (int, int64) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.snapshots.n, m.bytesByOwner["o"]
	}
	_, before := counts()
	var during int
	x.b.beforeStart = func() { during, _ = counts() }
	forks, err := m.Fork(ctx, "o", in.ID, 1, withMemory)
	if err != nil {
		t.Fatal(err)
	}
	if during != 1 {
		t.Errorf("snapshot slots taken during the fork = %d; want 1", during)
	}
	if err := m.Delete(ctx, "o", forks[0].ID); err != nil {
		t.Fatal(err)
	}
	if snaps, after := counts(); snaps != 0 || after != before {
		t.Errorf("after the fork: %d snapshot slots, %d bytes held; want 0, %d", snaps, after, before)
	}
}

// Two snapshots of one session at once both succeed: the second finds
// it snapshotted, which is what it asked for.
func TestConcurrentSnapshotsBothSucceed(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "", "")
	reached, release := stopAt(t, "captured")
	first := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); first <- err }()
	<-reached
	second := make(chan error, 1)
	go func() { _, err := m.Snapshot(ctx, "o", in.ID, memOn); second <- err }()
	time.Sleep(20 * time.Millisecond) // the checks hold whatever its timing
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first Snapshot() = %v", err)
	}
	if err := <-second; err != nil {
		t.Errorf("second Snapshot() = %v; want nil (it is snapshotted)", err)
	}
	m.mu.Lock()
	n := m.snapshots.n
	m.mu.Unlock()
	if n != 1 {
		t.Errorf("snapshot slots taken = %d; want 1", n)
	}
}
