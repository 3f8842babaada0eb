package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// fakeStore keeps records in memory and workspaces as plain directories;
// a workspace is "mounted" until the test says the host restarted.
type fakeStore struct {
	dir string

	mu      sync.Mutex
	records map[string]state.Session
	mounted map[string]bool
	sealed  map[string]bool
	n       int
	// readErr is what Sessions reports besides the records, as for a
	// record it could not read.
	readErr error
}

func newFakeStore(t testing.TB) *fakeStore {
	return &fakeStore{dir: t.TempDir(), records: map[string]state.Session{}, mounted: map[string]bool{}, sealed: map[string]bool{}}
}

func (f *fakeStore) SaveSession(s state.Session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[s.ID] = s
	return nil
}

func (f *fakeStore) SaveSessionSync(s state.Session) error { return f.SaveSession(s) }

func (f *fakeStore) RemoveSession(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.records, id)
	return nil
}

func (f *fakeStore) Sessions() ([]state.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var list []state.Session
	for _, s := range f.records {
		list = append(list, s)
	}
	return list, f.readErr
}

func (f *fakeStore) NewWorkspace(size, inodes int64) (state.Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	w := state.Workspace{Name: "ws_" + strings.Repeat("a", f.n)}
	w.Path = f.WorkspacePath(w.Name)
	f.mounted[w.Name] = true
	return w, os.MkdirAll(filepath.Join(w.Path, "workspace"), 0o755)
}

func (f *fakeStore) WorkspacePath(name string) string { return filepath.Join(f.dir, name) }

func (f *fakeStore) OpenFiles(name string) (*os.File, error) {
	return os.Open(filepath.Join(f.WorkspacePath(name), "workspace"))
}

func (f *fakeStore) DropWorkspace(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounted, name)
	return os.RemoveAll(f.WorkspacePath(name))
}

func (f *fakeStore) SealWorkspace(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sealed[name] = true
	return nil
}

func (f *fakeStore) Mounted(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mounted[name]
}

func (f *fakeStore) HasWorkspace(name string) bool {
	_, err := os.Stat(f.WorkspacePath(name))
	return err == nil
}

func (f *fakeStore) Workspaces() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

func (f *fakeStore) count() (records, workspaces int) {
	names, _ := f.Workspaces()
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.records), len(names)
}

// hostBackend is a fakeBackend that takes host workspaces, and remembers
// the workspace each box was given.
type hostBackend struct {
	*fakeBackend
	mu         sync.Mutex
	workspaces []string
}

func (h *hostBackend) HostWorkspaces() bool { return true }

func (h *hostBackend) Start(ctx context.Context, s spec.Spec) (Box, error) {
	h.mu.Lock()
	h.workspaces = append(h.workspaces, s.Scratch)
	h.mu.Unlock()
	return h.fakeBackend.Start(ctx, s)
}

func (h *hostBackend) Run(ctx context.Context, s spec.Spec, in io.Reader, live Stream) (spec.Result, error) {
	return h.fakeBackend.Run(ctx, s, in, live)
}

func newStoreManager(t *testing.T, st *fakeStore, cfg Config) (*Manager, *hostBackend) {
	t.Helper()
	b := &hostBackend{fakeBackend: &fakeBackend{}}
	cfg.Store = st
	m := NewManager(b, cfg)
	t.Cleanup(func() { m.Close() })
	return m, b
}

func TestStoreRecordsSessions(t *testing.T) {
	st := newFakeStore(t)
	m, b := newStoreManager(t, st, Config{})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	rec, ok := st.records[info.ID]
	if !ok || rec.Owner != "alice" || rec.Workspace == "" || rec.Backend != "fake" || rec.ServerPID != os.Getpid() {
		t.Fatalf("record = %+v (found %v), want alice's, with a workspace", rec, ok)
	}
	if got, want := b.workspaces[0], st.WorkspacePath(rec.Workspace); got != want {
		t.Errorf("the box's workspace = %q, want the store's %q", got, want)
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	if r, w := st.count(); r != 0 || w != 0 {
		t.Errorf("after Delete the store holds %d records and %d workspaces, want none", r, w)
	}
}

// crashedStore is a store as a server that died left it: alice's session
// with a workspace still mounted, bob's whose workspace the host lost, and
// a workspace nobody owns.
func crashedStore(t *testing.T) (*fakeStore, state.Session, state.Session) {
	st := newFakeStore(t)
	kept, _ := st.NewWorkspace(0, 0)
	lost, _ := st.NewWorkspace(0, 0)
	_, _ = st.NewWorkspace(0, 0)
	st.mounted[lost.Name] = false
	now := time.Now()
	a := state.Session{ID: "ses_alice_0123456789abcdefghij", Owner: "alice", Workspace: kept.Name, ServerPID: 4242,
		CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour), IdleTimeout: time.Hour, Limits: spec.DefaultLimits}
	b := a
	b.ID, b.Owner, b.Workspace = "ses_bob_0123456789abcdefghijkl", "bob", lost.Name
	// The last one of the three is the orphan: no record names it.
	st.records[a.ID], st.records[b.ID] = a, b
	return st, a, b
}

func TestRecoveredSessionsAreDead(t *testing.T) {
	st, a, b := crashedStore(t)
	m, _ := newStoreManager(t, st, Config{MaxSessions: 1})
	if r := m.Recovered(); r.Sessions != 2 || r.Lost != 1 || r.Dropped != 1 || r.Err != nil {
		t.Errorf("Recovered() = %+v, want 2 sessions, 1 lost, 1 dropped", r)
	}
	ctx := context.Background()
	got, err := m.Get(context.Background(), "alice", a.ID)
	if err != nil || got.State != StateDead || !strings.Contains(got.Reason, "pid 4242") {
		t.Errorf("Get(alice) = %+v, %v; want dead, the reason naming pid 4242", got, err)
	}
	if _, err := m.Get(context.Background(), "bob", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's Get of alice's session = %v, want ErrNotFound", err)
	}
	var dead *DeadError
	if _, err := m.Exec(ctx, "alice", a.ID, ExecRequest{Command: []string{"true"}}, Stream{}); !errors.As(err, &dead) || !dead.FilesKept {
		t.Errorf("Exec() in a dead session with a kept workspace = %v, want a DeadError with FilesKept", err)
	}
	if _, err := m.SetNetwork(context.Background(), "alice", a.ID, nil, nil); !errors.Is(err, ErrDead) {
		t.Errorf("SetNetwork() of a dead session = %v, want ErrDead", err)
	}
	if !st.sealed[a.Workspace] {
		t.Error("the kept workspace was not sealed read-only")
	}
	if bob, _ := m.Get(context.Background(), "bob", b.ID); !strings.Contains(bob.Reason, "lost") {
		t.Errorf("bob's reason = %q, want it to say the workspace was lost", bob.Reason)
	}
	if _, err := m.Files(context.Background(), "bob", b.ID); !errors.Is(err, ErrDead) {
		t.Errorf("Files() of a lost workspace = %v, want ErrDead", err)
	}
	if st.records[a.ID].DiedAt.IsZero() {
		t.Error("the record was not updated with when the session died")
	}
	// Dead sessions hold no slot: MaxSessions 1 still admits one.
	if _, err := m.Create(ctx, "carol", defaultOptions()); err != nil {
		t.Errorf("Create() beside two dead sessions = %v", err)
	}
	if err := m.Delete(ctx, "alice", a.ID); err != nil {
		t.Fatalf("Delete() of a dead session = %v", err)
	}
	if _, ok := st.records[a.ID]; ok || st.Mounted(a.Workspace) {
		t.Error("Delete() of a dead session left its record or workspace")
	}
}

func TestRecoveredWorkspaceIsReadable(t *testing.T) {
	testhost.RequireRoot(t)
	st, a, _ := crashedStore(t)
	ws := filepath.Join(st.WorkspacePath(a.Workspace), "workspace")
	if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "kept.txt")} {
		if err := os.Chown(p, hostid.WorkspaceOwner, hostid.WorkspaceOwner); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := newStoreManager(t, st, Config{})
	dir, err := m.Files(context.Background(), "alice", a.ID)
	if err != nil {
		t.Fatalf("Files() of a dead session = %v", err)
	}
	rc, _, err := dir.Read("kept.txt")
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "still here" {
		t.Errorf("Read() = %q, want the file the session had", b)
	}
}

func TestDeadSessionsExpire(t *testing.T) {
	st, a, _ := crashedStore(t)
	rec := st.records[a.ID]
	rec.ExpiresAt = time.Now().Add(-time.Second)
	st.records[a.ID] = rec
	m, _ := newStoreManager(t, st, Config{ReapEvery: 5 * time.Millisecond})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := m.Get(context.Background(), "alice", a.ID); errors.Is(err, ErrNotFound) {
			if _, ok := st.records[a.ID]; ok {
				t.Error("the expired dead session's record is still in the store")
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Error("a dead session past its TTL was never reaped")
}

func TestDiedSessionIsBuried(t *testing.T) {
	st := newFakeStore(t)
	m, b := newStoreManager(t, st, Config{MaxSessions: 1, ReapEvery: 5 * time.Millisecond})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	s.box.(*fakeBox).err = errors.New("its init was killed by SIGKILL")
	_ = s.box.Close() // the sandbox dies on its own
	// Burial gives back the slot last: a Create succeeds once it is done.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := m.Create(ctx, "alice", defaultOptions())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Create() after the only session died = %v; the dead one must give back its slot", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, err := m.Get(context.Background(), "alice", info.ID)
	if err != nil || got.State != StateDead || !strings.Contains(got.Reason, "its init was killed by SIGKILL") {
		t.Fatalf("Get() after the sandbox died = %+v, %v; want dead with the box's cause as reason", got, err)
	}
	st.mu.Lock()
	rec, sealed := st.records[info.ID], st.sealed[st.records[info.ID].Workspace]
	st.mu.Unlock()
	if rec.DiedAt.IsZero() || !sealed {
		t.Errorf("record = %+v, sealed %v; want it marked dead and its workspace sealed", rec, sealed)
	}
	if b.alive() != 1 {
		t.Errorf("%d boxes alive, want 1 (the new session's)", b.alive())
	}
}

func TestPoolAndCloseWithStore(t *testing.T) {
	st := newFakeStore(t)
	b := &hostBackend{fakeBackend: &fakeBackend{}}
	m := NewManager(b, Config{Store: st, Pool: 1})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, w := st.count(); w == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, w := st.count(); w != 1 {
		t.Fatalf("the pool made %d workspaces, want 1", w)
	}
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if rec := st.records[info.ID]; rec.Workspace != "ws_a" {
		t.Errorf("the pooled session's workspace = %q, want the pool's ws_a", rec.Workspace)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if r, w := st.count(); r != 0 || w != 0 {
		t.Errorf("after Close the store holds %d records and %d workspaces, want none", r, w)
	}
}

func TestDeadSessionsOutliveClose(t *testing.T) {
	st, a, _ := crashedStore(t)
	m, _ := newStoreManager(t, st, Config{})
	if _, err := m.Create(context.Background(), "carol", defaultOptions()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.records[a.ID]; !ok || !st.Mounted(a.Workspace) {
		t.Error("Close() removed a dead session's record or workspace; its owner may still fetch its files")
	}
	if r, _ := st.count(); r != 2 {
		t.Errorf("after Close the store holds %d records, want the 2 dead ones (carol's live one removed)", r)
	}
}

func TestRecoveryKeepsWorkspacesOfUnreadableRecords(t *testing.T) {
	st, _, _ := crashedStore(t)
	st.readErr = errors.New("session record ses_x.json (moved aside): parsing: bad")
	m, _ := newStoreManager(t, st, Config{})
	if r := m.Recovered(); r.Dropped != 0 || r.Err == nil {
		t.Errorf("Recovered() = %+v, want the read error and no workspace dropped", r)
	}
	if _, w := st.count(); w != 2 {
		t.Errorf("%d workspaces left, want 2 (the kept one and the unowned one that may be the unreadable record's)", w)
	}
}

func TestRecoveryRemovesRecordsOfDeletedSessions(t *testing.T) {
	st, a, _ := crashedStore(t)
	if err := st.DropWorkspace(a.Workspace); err != nil {
		t.Fatal(err)
	}
	m, _ := newStoreManager(t, st, Config{})
	if r := m.Recovered(); r.Stale != 1 || r.Sessions != 1 {
		t.Errorf("Recovered() = %+v, want 1 stale record removed and 1 session", r)
	}
	if _, err := m.Get(context.Background(), "alice", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a session deleted before the crash came back: Get() = %v", err)
	}
	if _, ok := st.records[a.ID]; ok {
		t.Error("the stale record is still in the store")
	}
}
