package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fsBackend is a fakeBackend whose boxes have a real /workspace: a
// directory of their own, which file calls and snapshots reach.
type fsBackend struct {
	*fakeBackend
	dir string
	mu  sync.Mutex
	n   int
	// boxes are the workspaces of the boxes started, in order.
	boxes []string
	// beforeStart, if set, runs before each Start but the first.
	beforeStart func()
	// scratch makes each box's workspace the workspace directory of a
	// scratch tmpfs of its own (rootfs.MountScratch, as the runtimes
	// mount them), unmounted when the box closes, instead of a plain
	// directory in dir.
	scratch bool
}

type fsBox struct {
	*fakeBox
	ws *os.File
	// scratch is the scratch tmpfs the box's workspace is on, if it has
	// one of its own; unmount unmounts it once.
	scratch string
	unmount sync.Once
	// allow is the egress allow list the box enforces: its spec's, then
	// SetNetwork's.
	mu    sync.Mutex
	allow []string
}

func (x *fsBox) SetNetwork(allow, _ []string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.allow = allow
	return nil
}

func (x *fsBox) allowed() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.allow
}

// Close closes the box and unmounts its scratch tmpfs, if it has one,
// so that a benchmark's boxes free their memory as real ones do.
func (x *fsBox) Close() error {
	err := x.fakeBox.Close()
	x.unmount.Do(func() {
		if x.scratch == "" {
			return
		}
		err = errors.Join(err, x.ws.Close(), rootfs.UnmountScratch(x.scratch))
	})
	return err
}

func (x *fsBox) Workspace() *os.File   { return x.ws }
func (x *fsBox) FileOwner() (int, int) { return os.Getuid(), os.Getgid() }

func (f *fsBackend) Start(ctx context.Context, s spec.Spec) (Box, error) {
	f.mu.Lock()
	before := f.beforeStart
	if f.n == 0 {
		before = nil
	}
	f.mu.Unlock()
	if before != nil {
		before()
	}
	b, err := f.fakeBackend.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.n++
	p := filepath.Join(f.dir, "box"+string(rune('a'+f.n)))
	scratch := ""
	if f.scratch {
		p, scratch = filepath.Join(p, "workspace"), p
	}
	f.boxes = append(f.boxes, p)
	f.mu.Unlock()
	if scratch != "" {
		if err := rootfs.MountScratch(scratch, s.Limits.DiskBytes, s.Limits.Inodes(), os.Getuid(), os.Getgid()); err != nil {
			return nil, err
		}
	} else if err := os.Mkdir(p, 0o755); err != nil {
		return nil, err
	}
	ws, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return &fsBox{fakeBox: b.(*fakeBox), ws: ws, scratch: scratch, allow: s.Network.Allow}, nil
}

func (f *fsBackend) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boxes[len(f.boxes)-1]
}

// snapshotSetup is a Manager over an fsBackend with a Store and a
// snapshot store, both outliving the Manager (as the state directory
// outlives a server).
type snapshotSetup struct {
	b     *fsBackend
	store *fakeStore
	snaps *snapshot.Store
}

func newSnapshotSetup(t testing.TB) *snapshotSetup {
	t.Helper()
	snaps, err := snapshot.Open(filepath.Join(t.TempDir(), "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	return &snapshotSetup{b: &fsBackend{fakeBackend: &fakeBackend{}, dir: t.TempDir()}, store: newFakeStore(t), snaps: snaps}
}

// manager starts a Manager on the setup; close says whether the test
// closes it at its end (a "crashed" one is left as it is).
func (x *snapshotSetup) manager(t *testing.T, closeAtEnd bool) *Manager {
	t.Helper()
	m := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, MaxSnapshots: 2, ExecPace: -1, StartRate: -1})
	if closeAtEnd {
		t.Cleanup(func() { m.Close() })
	}
	return m
}

// session creates a session of owner "o" on m with o and, where file
// (a slash-separated path in its workspace) is set, writes content there.
func (x *snapshotSetup) session(t *testing.T, m *Manager, o SessionOptions, file, content string) Info {
	t.Helper()
	in, err := m.Create(context.Background(), "o", o)
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	if file != "" {
		writeFileT(t, filepath.Join(x.b.last(), filepath.FromSlash(file)), content)
	}
	return in
}

// snapshotted creates a session of owner "o" on m with o and snapshots
// it.
func (x *snapshotSetup) snapshotted(t *testing.T, m *Manager, o SessionOptions) Info {
	t.Helper()
	in := x.session(t, m, o, "", "")
	if _, err := m.Snapshot(context.Background(), "o", in.ID, memOn); err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	return in
}

func writeFileT(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func readFileT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return string(b)
}

func snapshotNames(t *testing.T, s *snapshot.Store) []string {
	t.Helper()
	entries, err := os.ReadDir(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSnapshotAndResume(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, withEnv(defaultOptions(), "A=1"), "dir/f.txt", "hello")
	if err := os.Symlink("/etc/passwd", filepath.Join(x.b.last(), "link")); err != nil {
		t.Fatal(err)
	}
	got, err := m.Snapshot(ctx, "o", in.ID, memOn)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if got.State != StateSnapshotted || got.Snapshot == nil || got.Snapshot.Memory || got.Snapshot.Files != 1 || got.Snapshot.Skipped != 1 {
		t.Fatalf("after Snapshot: state %s, snapshot %+v; want snapshotted, 1 file, 1 skipped (the link), no memory", got.State, got.Snapshot)
	}
	if n := x.b.alive(); n != 0 {
		t.Errorf("boxes alive after Snapshot: got %d, want 0", n)
	}
	if rec := x.store.records[in.ID]; rec.Snapshot == "" || len(rec.Env) != 1 {
		t.Errorf("record after Snapshot: %+v; want it to name the snapshot and keep the env", rec)
	}
	if again, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil || again.State != StateSnapshotted {
		t.Errorf("second Snapshot: %v, %v; want it to do nothing", again.State, err)
	}
	// An exec resumes it, with the files back and a fresh box.
	if _, err := m.Exec(ctx, "o", in.ID, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Fatalf("Exec on a snapshotted session: %v", err)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "dir", "f.txt")); got != "hello" {
		t.Errorf("restored file: got %q, want %q", got, "hello")
	}
	if _, err := os.Lstat(filepath.Join(x.b.last(), "link")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symbolic link was restored (%v); want it skipped", err)
	}
	if info, _ := m.Get(context.Background(), "o", in.ID); info.State != StateReady || info.Snapshot != nil {
		t.Errorf("after the exec: state %s, snapshot %+v; want ready, none", info.State, info.Snapshot)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots left after the resume: %v", names)
	}
}

func TestSnapshotCapAndUnsupported(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	var ids []string
	for range 3 {
		in := x.session(t, m, defaultOptions(), "", "")
		ids = append(ids, in.ID)
	}
	for _, id := range ids[:2] {
		if _, err := m.Snapshot(ctx, "o", id, memOn); err != nil {
			t.Fatal(err)
		}
	}
	_, err := m.Snapshot(ctx, "o", ids[2], memOn)
	if !errors.Is(err, ErrTooMany) {
		t.Fatalf("third Snapshot with --max-snapshots 2: got %v, want ErrTooMany", err)
	}
	if info, _ := m.Get(context.Background(), "o", ids[2]); info.State != StateReady {
		t.Errorf("refused session: state %s, want ready (as it was)", info.State)
	}
	plain, _ := newTestManager(t, Config{})
	in, err := plain.Create(ctx, "o", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Snapshot(ctx, "o", in.ID, memOn); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Snapshot without a state directory: got %v, want ErrUnsupported", err)
	}
}

func TestSnapshotSurvivesRestart(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, false)
	ctx := context.Background()
	in := x.session(t, m, defaultOptions(), "f", "kept")
	if _, err := m.Snapshot(ctx, "o", in.ID, memOn); err != nil {
		t.Fatal(err)
	}
	m.Close() // a clean stop keeps snapshotted sessions, as a crash does
	m2 := x.manager(t, true)
	if r := m2.Recovered(); r.Snapshotted != 1 {
		t.Errorf("Recovered: %+v; want 1 snapshotted", r)
	}
	info, err := m2.Resume(ctx, "o", in.ID)
	if err != nil || info.State != StateReady {
		t.Fatalf("Resume after restart: %v, %v; want ready", info.State, err)
	}
	if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "kept" {
		t.Errorf("restored file: got %q, want %q", got, "kept")
	}
}

// errCrash stops a snapshot where the hook says, as if the server died.
func TestSnapshotCrashAtEachStep(t *testing.T) {
	for _, tc := range []struct {
		step string
		// want is the state the next server reports.
		want State
	}{
		{"begun", StateDead},
		{"captured", StateDead},
		{"committed", StateDead},
		{"recorded", StateSnapshotted},
	} {
		t.Run(tc.step, func(t *testing.T) {
			x := newSnapshotSetup(t)
			m := x.manager(t, false)
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
				_, _ = m.Snapshot(ctx, "o", in.ID, memOn)
			}()
			<-done
			stepHook = nil
			m2 := x.manager(t, true)
			info, err := m2.Get(context.Background(), "o", in.ID)
			if err != nil || info.State != tc.want {
				t.Fatalf("after a crash at %s: state %s (%v), want %s", tc.step, info.State, err, tc.want)
			}
			names := snapshotNames(t, x.snaps)
			wantSnaps := 0
			if tc.want == StateSnapshotted {
				wantSnaps = 1
				if _, err := m2.Resume(ctx, "o", in.ID); err != nil {
					t.Fatalf("Resume: %v", err)
				}
				if got := readFileT(t, filepath.Join(x.b.last(), "f")); got != "data" {
					t.Errorf("restored file: got %q, want %q", got, "data")
				}
			}
			if len(names) != wantSnaps {
				t.Errorf("snapshot directory after restart: %v, want %d whole snapshot(s) and no leftovers", names, wantSnaps)
			}
		})
	}
}

func TestResumeCrashAtEachStep(t *testing.T) {
	for _, tc := range []struct {
		step string
		want State
	}{
		{"restored", StateSnapshotted},
		{"resumed", StateDead}, // recorded running: a restart's rules for a running session
	} {
		t.Run(tc.step, func(t *testing.T) {
			x := newSnapshotSetup(t)
			m := x.manager(t, false)
			ctx := context.Background()
			in := x.snapshotted(t, m, defaultOptions())
			stepHook = func(s string) {
				if s == tc.step {
					runtime.Goexit()
				}
			}
			t.Cleanup(func() { stepHook = nil })
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = m.Resume(ctx, "o", in.ID)
			}()
			<-done
			stepHook = nil
			m2 := x.manager(t, true)
			if info, err := m2.Get(context.Background(), "o", in.ID); err != nil || info.State != tc.want {
				t.Fatalf("after a crash at %s: state %s (%v), want %s", tc.step, info.State, err, tc.want)
			}
			want := 0
			if tc.want == StateSnapshotted {
				want = 1
			}
			if names := snapshotNames(t, x.snaps); len(names) != want {
				t.Errorf("snapshot directory after restart: %v, want %d", names, want)
			}
		})
	}
}

func TestFork(t *testing.T) {
	x := newSnapshotSetup(t)
	m := x.manager(t, true)
	ctx := context.Background()
	in := x.session(t, m, withEnv(defaultOptions(), "K=v"), "a/b", "forked")
	for _, n := range []int{0, MaxFork + 1} {
		if _, err := m.Fork(ctx, "o", in.ID, n, withMemory); !errors.Is(err, spec.ErrInvalid) {
			t.Errorf("Fork count %d: got %v, want ErrInvalid", n, err)
		}
	}
	forks, err := m.Fork(ctx, "o", in.ID, 3, withMemory)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	seen := map[string]bool{in.ID: true}
	for _, f := range forks {
		if seen[f.ID] || f.State != StateReady {
			t.Errorf("fork %s: state %s, repeated id %v; want a new ready session", f.ID, f.State, seen[f.ID])
		}
		seen[f.ID] = true
	}
	x.b.mu.Lock()
	boxes := append([]string(nil), x.b.boxes[1:]...)
	x.b.mu.Unlock()
	for _, p := range boxes {
		if got := readFileT(t, filepath.Join(p, "a", "b")); got != "forked" {
			t.Errorf("fork's file in %s: got %q, want %q", p, got, "forked")
		}
	}
	if info, _ := m.Get(context.Background(), "o", in.ID); info.State != StateReady {
		t.Errorf("source after Fork: %s, want ready (as it was)", info.State)
	}
	if names := snapshotNames(t, x.snaps); len(names) != 0 {
		t.Errorf("snapshots left after Fork: %v", names)
	}
}

func withEnv(o SessionOptions, env ...string) SessionOptions {
	o.Env = env
	return o
}

// TestSnapshottedLifecycle: a snapshotted session is not ended at its
// idle timeout, is at its TTL, and its end (TTL or delete) removes its
// snapshot and record; a file call resumes it.
func TestSnapshottedLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(m *Manager, id string) error
		// gone says the session must be gone after do.
		gone bool
	}{
		{"idle", func(m *Manager, id string) error { m.reap(time.Now().Add(30 * time.Minute)); return nil }, false},
		{"ttl", func(m *Manager, id string) error { m.reap(time.Now().Add(48 * time.Hour)); return nil }, true},
		{"delete", func(m *Manager, id string) error { return m.Delete(context.Background(), "o", id) }, true},
		{"files", func(m *Manager, id string) error { _, err := m.Files(context.Background(), "o", id); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			m := x.manager(t, true)
			o := defaultOptions()
			o.IdleTimeout = time.Minute
			in := x.snapshotted(t, m, o)
			if err := tc.do(m, in.ID); err != nil {
				t.Fatal(err)
			}
			if tc.gone {
				if !waitUntil(func() bool { _, err := m.Get(context.Background(), "o", in.ID); return errors.Is(err, ErrNotFound) }) {
					t.Fatal("the session is still there")
				}
				if names := snapshotNames(t, x.snaps); len(names) != 0 {
					t.Errorf("snapshots left: %v", names)
				}
				if recs, _ := x.store.count(); recs != 0 {
					t.Errorf("records left: %d", recs)
				}
				return
			}
			info, err := m.Get(context.Background(), "o", in.ID)
			want := StateSnapshotted
			if tc.name == "files" {
				want = StateReady
			}
			if err != nil || info.State != want {
				t.Errorf("after %s: %s, %v; want %s", tc.name, info.State, err, want)
			}
		})
	}
}

// TestAutoSnapshot: at its idle timeout a session with auto-snapshot is
// snapshotted, not paused or ended; without a place for snapshots it
// ends as idle.
func TestAutoSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snaps bool
		want  State
	}{
		{"snapshotted", true, StateSnapshotted},
		{"no state directory", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newSnapshotSetup(t)
			cfg := Config{Store: x.store, ExecPace: -1, StartRate: -1, ReapEvery: time.Hour}
			if tc.snaps {
				cfg.Snapshots = x.snaps
			}
			m := NewManager(x.b, cfg)
			t.Cleanup(func() { m.Close() })
			o := defaultOptions()
			o.IdleTimeout, o.AutoSnapshot, o.AutoPause = time.Minute, true, true
			in, err := m.Create(context.Background(), "o", o)
			if err != nil {
				t.Fatal(err)
			}
			m.reap(time.Now().Add(30 * time.Minute))
			ok := waitUntil(func() bool {
				info, err := m.Get(context.Background(), "o", in.ID)
				if tc.want == "" {
					return errors.Is(err, ErrNotFound)
				}
				return err == nil && info.State == tc.want
			})
			if !ok {
				info, err := m.Get(context.Background(), "o", in.ID)
				t.Fatalf("after the idle timeout: %s, %v; want %q (\"\": ended)", info.State, err, tc.want)
			}
		})
	}
}
