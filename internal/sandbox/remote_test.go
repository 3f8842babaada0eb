package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fakeRemote is a RemoteBackend whose store is a map shared by the
// Managers given it, standing in for a cluster's claims.
type fakeRemote struct {
	fakeBackend
	store *remoteStore
}

// remoteStore is fakeRemote's shared store: the recorded sessions, and
// which ids were released.
type remoteStore struct {
	mu       sync.Mutex
	sessions map[string]RemoteSession
	released []string
	reaps    int
	// finds counts Find's calls; gate, when set, holds each until closed.
	finds int
	gate  chan struct{}
	// releasing counts Release's calls; releaseGate, when set, holds
	// each until closed.
	releasing   int
	releaseGate chan struct{}
	// lists counts List's calls; listErr, when set, is its answer.
	lists   int
	listErr error
}

func (f *fakeRemote) Claim(ctx context.Context, r RemoteSession, s spec.Spec) (Box, error) {
	b, err := f.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	r.Created, r.Expires = time.Now(), time.Now().Add(r.TTL)
	r.Network = s.Network // recorded for Find, as a claim records it
	f.store.sessions[r.ID] = r
	return &remoteBox{fakeBox: b.(*fakeBox), id: r.ID, store: f.store}, nil
}

func (f *fakeRemote) Find(ctx context.Context, owner, id string, _ spec.Ceilings) (Box, RemoteSession, error) {
	f.store.mu.Lock()
	r, ok := f.store.sessions[id]
	f.store.finds++
	gate := f.store.gate
	f.store.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if !ok || r.Owner != owner {
		return nil, RemoteSession{}, fmt.Errorf("%w: no session %q", ErrNotFound, id)
	}
	b, err := f.Start(ctx, spec.Spec{Limits: r.Limits})
	if err != nil {
		return nil, RemoteSession{}, err
	}
	r.Note = "processes restarted"
	return &remoteBox{fakeBox: b.(*fakeBox), id: id, store: f.store}, r, nil
}

// List is owner's recorded sessions, ready unless their record says
// otherwise, in no order.
func (f *fakeRemote) List(_ context.Context, owner string) ([]RemoteSession, error) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	f.store.lists++
	if f.store.listErr != nil {
		return nil, f.store.listErr
	}
	var out []RemoteSession
	for _, r := range f.store.sessions {
		if r.Owner != owner {
			continue
		}
		if r.State == "" {
			r.State = StateReady
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeRemote) Reap(context.Context) error {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	f.store.reaps++
	return nil
}

// remoteBox is a fakeBox whose session Release removes from the store
// and whose agent serves its files (stubFiles), as a Pod's does.
type remoteBox struct {
	*fakeBox
	id    string
	store *remoteStore
}

func (x *remoteBox) RemoteFiles(workspace.Limits) (workspace.Files, error) {
	return stubFiles{}, nil
}

func (x *remoteBox) Release(context.Context) error {
	x.store.mu.Lock()
	x.store.releasing++
	gate := x.store.releaseGate
	x.store.mu.Unlock()
	if gate != nil {
		<-gate
	}
	x.store.mu.Lock()
	defer x.store.mu.Unlock()
	delete(x.store.sessions, x.id)
	x.store.released = append(x.store.released, x.id)
	return nil
}

// TestRemoteAdoptKeepsNetwork: a Manager that adopts another's session
// serves it with the network policy its backend recorded, not --net
// none; a record without one is --net none.
func TestRemoteAdoptKeepsNetwork(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	a := NewManager(&fakeRemote{store: store}, Config{})
	defer a.Close()
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	ctx := context.Background()
	for _, n := range []spec.NetworkPolicy{
		{Mode: spec.NetProxy, Allow: []string{"example.org"}, Deny: []string{"bad.example.org"}},
		{},
	} {
		info, err := a.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits, TTL: time.Hour, Network: n})
		if err != nil {
			t.Fatalf("Create with %+v: %v", n, err)
		}
		want := n
		if want.Mode == "" {
			want.Mode = spec.NetNone
		}
		got, err := b.Get(context.Background(), "alice", info.ID)
		if err != nil || got.Network.Mode != want.Mode || !slices.Equal(got.Network.Allow, want.Allow) || !slices.Equal(got.Network.Deny, want.Deny) {
			t.Errorf("the adopting Manager's Get: network %+v, %v; want %+v", got.Network, err, want)
		}
	}
}

// TestRemoteSessions: on a RemoteBackend the Manager claims each session
// under the id it reports, a second Manager serves it by Find, a
// Manager's Close leaves it to the others, and Delete releases it.
func TestRemoteSessions(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	a := NewManager(&fakeRemote{store: store}, Config{})
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	ctx := context.Background()
	info, err := a.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits, TTL: time.Hour, IdleTimeout: time.Minute})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	store.mu.Lock()
	rec, ok := store.sessions[info.ID]
	store.mu.Unlock()
	if !ok || rec.Owner != "alice" || rec.TTL != time.Hour || rec.Idle != time.Minute || rec.MaxPerOwner != a.PerOwner() || rec.MaxPerOwner <= 0 {
		t.Fatalf("store holds %+v for %s, want alice's session with TTL 1h, idle 1m and the per-key limit %d", rec, info.ID, a.PerOwner())
	}
	short, err := a.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits, TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("Create with a TTL under the default idle timeout: %v", err)
	}
	store.mu.Lock()
	rec = store.sessions[short.ID]
	store.mu.Unlock()
	if rec.Idle != 5*time.Second {
		t.Errorf("a 5s session's recorded idle timeout: got %v, want it lowered to the TTL", rec.Idle)
	}
	if _, err := b.Get(context.Background(), "bob", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's Get on the second Manager: got %v, want ErrNotFound", err)
	}
	got, err := b.Get(context.Background(), "alice", info.ID)
	if err != nil || got.ID != info.ID || got.IdleTimeout != time.Minute {
		t.Fatalf("the second Manager's Get: got %+v, %v, want the session with idle 1m", got, err)
	}
	if r, err := b.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"echo", "hi"}}, Stream{}); err != nil || r.Stdout != "echo hi" {
		t.Errorf("the second Manager's Exec: got %+v, %v, want stdout %q", r, err, "echo hi")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	store.mu.Lock()
	_, kept := store.sessions[info.ID]
	store.mu.Unlock()
	if !kept {
		t.Errorf("a Manager's Close released session %s, want it left to the other servers", info.ID)
	}
	if err := b.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if _, left := store.sessions[info.ID]; left || !slices.Contains(store.released, info.ID) {
		t.Errorf("after Delete: store still holds it %v, released %v; want it released once", left, store.released)
	}
}

// TestRemoteRefusals: what a remote session's files cannot do here
// (snapshot, fork) and a warm pool of the server's own are refused in
// one line each; its file API is its agent's.
func TestRemoteRefusals(t *testing.T) {
	rb := &fakeRemote{store: &remoteStore{sessions: map[string]RemoteSession{}}}
	if _, _, err := (Config{Pool: 2}).Fit(rb); err == nil {
		t.Errorf("Fit with --pool 2 on a remote backend: got nil, want an error naming --pool")
	}
	m := NewManager(rb, Config{Snapshots: nil})
	defer m.Close()
	info, err := m.Create(context.Background(), "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := m.Snapshot(context.Background(), "alice", info.ID, memOn); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Snapshot: got %v, want ErrUnsupported", err)
	}
	if _, err := m.Fork(context.Background(), "alice", info.ID, 1, withMemory); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Fork: got %v, want ErrUnsupported", err)
	}
	files, err := m.Files(context.Background(), "alice", info.ID)
	if err != nil {
		t.Fatalf("Files: got %v, want the box's agent's files", err)
	}
	if _, ok := files.(stubFiles); !ok {
		t.Errorf("Files: got %T, want the box's agent's stubFiles", files)
	}
}

// gatedLeftover is a session of alice's that a closed Manager left in a
// fresh store, whose Finds wait until gate closes: what a server finds
// when another started the session and went away.
func gatedLeftover(t *testing.T) (store *remoteStore, info Info, gate chan struct{}) {
	t.Helper()
	store = &remoteStore{sessions: map[string]RemoteSession{}}
	a := NewManager(&fakeRemote{store: store}, Config{})
	info, err := a.Create(context.Background(), "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	gate = make(chan struct{})
	store.mu.Lock()
	store.gate = gate
	store.mu.Unlock()
	return store, info, gate
}

// waitFind waits until a Find on the store has begun (and, with a gate
// set, is held on it).
func (s *remoteStore) waitFind(t *testing.T) {
	t.Helper()
	testhost.WaitFor(t, "a Find to begin", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.finds > 0
	})
}

// TestRemoteAdoptOnce: requests arriving together for a session this
// Manager does not hold attach it once (a second dial would find the
// Pod taken by the first) and all get it.
func TestRemoteAdoptOnce(t *testing.T) {
	store, info, gate := gatedLeftover(t)
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := b.Get(context.Background(), "alice", info.ID)
			errs <- err
		}()
	}
	// Let the first Find through once one is under way; the others wait
	// for it, or find the session held.
	store.waitFind(t)
	close(gate)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a concurrent Get: %v", err)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.finds != 1 {
		t.Errorf("Find called %d times for %d concurrent requests, want once", store.finds, n)
	}
}

// TestRemoteAdoptCancel: a request whose context ends while the session
// it names is being attached from the store stops waiting at once (the
// Find is held on a gate, so the answer cannot be the attach's), and the
// attach goes on for a concurrent request, which gets the session from
// the one Find.
func TestRemoteAdoptCancel(t *testing.T) {
	store, info, gate := gatedLeftover(t)
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}}, Stream{})
		cancelled <- err
	}()
	store.waitFind(t)
	waiter := make(chan error, 1)
	go func() {
		_, err := b.Get(context.Background(), "alice", info.ID)
		waiter <- err
	}()
	cancel()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled request: got %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a bound, not a timing assertion
		t.Fatalf("the cancelled request still waits for the held attach")
	}
	close(gate)
	if err := <-waiter; err != nil {
		t.Errorf("the concurrent Get: got %v, want the session", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.finds != 1 {
		t.Errorf("Find called %d times, want once", store.finds)
	}
}

// TestRemoteLookupBounds: an id newID cannot make is no session without
// asking the store; an id the store answered not found is answered so
// again without asking; and a lookup that finds every Find slot taken
// is busy, not queued on the store.
func TestRemoteLookupBounds(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	m := NewManager(&fakeRemote{store: store}, Config{})
	defer m.Close()
	finds := func() int {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.finds
	}
	unknown := newID()
	for _, c := range []struct {
		id        string
		wantFinds int
	}{
		{"nope", 0},
		{"ses_" + strings.Repeat("a", 31) + "!", 0},
		{newID() + "a", 0},
		{unknown, 1},
		{unknown, 1}, // remembered as missing
	} {
		if _, err := m.Get(context.Background(), "alice", c.id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q): got %v, want ErrNotFound", c.id, err)
		}
		if got := finds(); got != c.wantFinds {
			t.Errorf("after Get(%q): got %d Finds, want %d", c.id, got, c.wantFinds)
		}
	}
	for range remoteFinds {
		m.finds <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := m.find(ctx, &fakeRemote{store: store}, "alice", newID()); !errors.Is(err, ErrBusy) || finds() != 1 {
		t.Errorf("a Find with every slot taken: got %v after %d Finds, want ErrBusy without a Find", err, finds())
	}
}

// TestGuardLookup: a lookup made beside the Manager (a server asking
// which replica holds a session) is bounded as the Manager's own: an id
// newID cannot make or one found missing is not looked up, a missing one
// found there is remembered for the Manager's own lookup too, and one
// that finds every slot taken is busy without a call.
func TestGuardLookup(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	m := NewManager(&fakeRemote{store: store}, Config{})
	defer m.Close()
	ctx := context.Background()
	looks := 0
	missing := func(context.Context) error {
		looks++
		return fmt.Errorf("%w: none", ErrNotFound)
	}
	unknown := newID()
	for _, c := range []struct {
		id        string
		wantLooks int
	}{
		{"nope", 0},
		{newID() + "a", 0},
		{unknown, 1},
		{unknown, 1}, // remembered as missing
	} {
		if err := m.GuardLookup(ctx, "alice", c.id, missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("GuardLookup(%q): got %v, want ErrNotFound", c.id, err)
		}
		if looks != c.wantLooks {
			t.Errorf("after GuardLookup(%q): got %d lookups, want %d", c.id, looks, c.wantLooks)
		}
	}
	if _, err := m.Get(context.Background(), "alice", unknown); !errors.Is(err, ErrNotFound) || store.finds != 0 {
		t.Errorf("Get of the id GuardLookup found missing: got %v after %d Finds, want ErrNotFound without a Find", err, store.finds)
	}
	for range remoteFinds {
		m.finds <- struct{}{}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.GuardLookup(cctx, "alice", newID(), missing); !errors.Is(err, ErrBusy) || looks != 1 {
		t.Errorf("a lookup with every slot taken: got %v after %d lookups, want ErrBusy without one", err, looks)
	}
}

// TestRemoteDeleteReleasesFirst: while Delete releases a session's
// record, the session is still held (stopping): a request arriving then
// does not attach its Pod again from the record, and after Delete the
// session is gone.
func TestRemoteDeleteReleasesFirst(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}, releaseGate: make(chan struct{})}
	m := NewManager(&fakeRemote{store: store}, Config{})
	defer m.Close()
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- m.Delete(ctx, "alice", info.ID) }()
	testhost.WaitFor(t, "Delete to begin the release", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.releasing > 0
	})
	if got, err := m.Get(context.Background(), "alice", info.ID); err == nil && got.State == StateReady {
		t.Errorf("Get during the release: got %s, want the session stopping or gone", got.State)
	}
	store.mu.Lock()
	if store.finds != 0 {
		t.Errorf("the store was asked %d times to find the session being deleted, want none (it is still held)", store.finds)
	}
	store.mu.Unlock()
	close(store.releaseGate)
	if err := <-deleted; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := m.Get(context.Background(), "alice", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: got %v, want ErrNotFound", err)
	}
}

// TestRemoteAdoptFailureShared: when the one attach of a session fails,
// the requests that waited for it get its error (a busy Pod: retry), not
// a 404 for a live session.
func TestRemoteAdoptFailureShared(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}, gate: make(chan struct{})}
	m := NewManager(&busyRemote{fakeRemote{store: store}}, Config{})
	defer m.Close()
	const n = 4
	id := newID()
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := m.Get(context.Background(), "alice", id)
			errs <- err
		}()
	}
	store.waitFind(t)
	close(store.gate)
	for range n {
		if err := <-errs; !errors.Is(err, ErrBusy) {
			t.Errorf("a concurrent Get: got %v, want ErrBusy as the attach answered", err)
		}
	}
}

// busyRemote is a fakeRemote whose Pods never answer: Find is ErrBusy.
type busyRemote struct{ fakeRemote }

func (f *busyRemote) Find(context.Context, string, string, spec.Ceilings) (Box, RemoteSession, error) {
	f.store.mu.Lock()
	f.store.finds++
	gate := f.store.gate
	f.store.mu.Unlock()
	<-gate
	return nil, RemoteSession{}, fmt.Errorf("%w: its Pod answered no new connection in time", ErrBusy)
}

// TestRemoteAdoptTakesNoStart: attaching a session another server
// started spends none of the owner's starts (--start-rate): a key whose
// starts are used up here still reaches its sessions.
func TestRemoteAdoptTakesNoStart(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	a := NewManager(&fakeRemote{store: store}, Config{})
	defer a.Close()
	b := NewManager(&fakeRemote{store: store}, Config{StartRate: 1e-6, MaxSessions: 2 * MinStartBurst, MaxPerOwner: 2 * MinStartBurst})
	defer b.Close()
	ctx := context.Background()
	info, err := a.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i > MinStartBurst {
			t.Fatalf("%d creates at a start rate of one per 11 days all passed: want the pacer to refuse past its burst", i)
		}
		var paced *StartPacedError
		if _, err := b.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits}); errors.As(err, &paced) {
			break
		} else if err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	if _, err := b.Get(context.Background(), "alice", info.ID); err != nil {
		t.Errorf("attaching a session another server started, with the key's starts used up: got %v, want it attached", err)
	}
}

// TestRemoteListEverywhere: a Manager lists the owner's sessions every
// server holds, each once and oldest first (its own as it holds them,
// the others' as the store records them, with their limits clamped to
// its ceilings and an expired record left out), never another owner's;
// a store that does not answer fails the listing with a public line
// naming no store detail.
func TestRemoteListEverywhere(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	ceil := spec.Ceilings(spec.DefaultLimits)
	a := NewManager(&fakeRemote{store: store}, Config{Ceilings: ceil})
	defer a.Close()
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	ctx := context.Background()
	mine, err := a.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := b.Create(ctx, "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "bob", SessionOptions{Limits: spec.DefaultLimits}); err != nil {
		t.Fatal(err)
	}
	big := spec.DefaultLimits
	big.MemoryBytes *= 64
	store.mu.Lock()
	dying, expired, planted := newID(), newID(), "ses_\x1b[31mlooks-like-another"
	store.sessions[dying] = RemoteSession{ID: dying, Owner: "alice", Created: time.Now(), State: StateDead, Reason: "its Pod was deleted", Limits: big}
	store.sessions[expired] = RemoteSession{ID: expired, Owner: "alice", Created: time.Now(), Expires: time.Now().Add(-time.Second)}
	store.sessions[planted] = RemoteSession{ID: planted, Owner: "alice", Created: time.Now()}
	store.mu.Unlock()
	got, err := a.ListEverywhere(ctx, "alice")
	if err != nil {
		t.Fatalf("ListEverywhere: %v", err)
	}
	var ids []string
	for _, i := range got {
		ids = append(ids, i.ID)
	}
	if want := []string{mine.ID, theirs.ID, dying}; !slices.Equal(ids, want) {
		t.Fatalf("alice's sessions: got %q, want %q (each once, oldest first, no id a lookup would refuse)", ids, want)
	}
	if got[1].State != StateReady || got[2].State != StateDead || got[2].Reason != "its Pod was deleted" {
		t.Errorf("records' states: got %s and %s %q, want ready and dead with the record's reason", got[1].State, got[2].State, got[2].Reason)
	}
	if got[2].Limits.MemoryBytes != ceil.MemoryBytes {
		t.Errorf("a record asking %d bytes of memory: got %d listed, want the ceiling %d", big.MemoryBytes, got[2].Limits.MemoryBytes, ceil.MemoryBytes)
	}
	if local := a.List("alice"); len(local) != 1 || local[0].ID != mine.ID {
		t.Errorf("List: got %v, want only the session a holds", local)
	}
	store.mu.Lock()
	store.listErr = errors.New("dial tcp 10.96.0.1:443: connection refused")
	store.mu.Unlock()
	_, err = a.ListEverywhere(ctx, "alice")
	var pub *RemoteListError
	if !errors.As(err, &pub) || strings.Contains(pub.Public(), "10.96.0.1") || !strings.Contains(err.Error(), "10.96.0.1") {
		t.Errorf("a store that does not answer: got %v, want a RemoteListError whose public line names no address", err)
	}
	store.mu.Lock()
	store.listErr = nil
	store.mu.Unlock()
	for range remoteFinds {
		a.finds <- struct{}{}
	}
	if _, err := a.ListEverywhere(ctx, "alice"); err != nil {
		t.Errorf("a listing with every lookup slot taken: got %v, want it served from its own slots", err)
	}
	for range remoteLists {
		a.lists <- struct{}{}
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	store.mu.Lock()
	before := store.lists
	store.mu.Unlock()
	if _, err := a.ListEverywhere(short, "alice"); !errors.Is(err, ErrBusy) || store.lists != before {
		t.Errorf("a listing with every listing slot taken: got %v after %d more Lists, want ErrBusy without a List", err, store.lists-before)
	}
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	<-a.lists
	if _, err := a.ListEverywhere(gone, "alice"); err == nil || store.lists != before {
		t.Errorf("a listing whose request ended: got %v after %d more Lists, want an error without a List", err, store.lists-before)
	}
}

// TestLookupShare: one key whose lookups of sessions held elsewhere are
// all waiting (a Find holds its slot through a slow Pod attach) takes
// no more than its share of the slots: its next lookup is busy at once,
// without a call, and another key's is served from the slots left.
func TestLookupShare(t *testing.T) {
	m := NewManager(&fakeRemote{store: &remoteStore{sessions: map[string]RemoteSession{}}}, Config{})
	defer m.Close()
	ctx := context.Background()
	in, release := make(chan struct{}), make(chan struct{})
	stuck := func(context.Context) error { in <- struct{}{}; <-release; return nil }
	var wg sync.WaitGroup
	for range remoteFindsPerKey {
		wg.Go(func() {
			if err := m.GuardLookup(ctx, "alice", newID(), stuck); err != nil {
				t.Errorf("alice's lookup within her share: %v", err)
			}
		})
		<-in
	}
	looked := false
	look := func(context.Context) error { looked = true; return nil }
	if err := m.GuardLookup(ctx, "alice", newID(), look); !errors.Is(err, ErrBusy) || looked || !strings.Contains(err.Error(), "this key has") {
		t.Errorf("alice's lookup past her share: got %v (looked: %v), want ErrBusy naming the key's share without a call", err, looked)
	}
	if err := m.GuardLookup(ctx, "bob", newID(), look); err != nil || !looked {
		t.Errorf("bob's lookup while alice holds her share: got %v (looked: %v), want it served", err, looked)
	}
	close(release)
	wg.Wait()
	looked = false
	if err := m.GuardLookup(ctx, "alice", newID(), look); err != nil || !looked {
		t.Errorf("alice's lookup once hers ended: got %v (looked: %v), want it served", err, looked)
	}
}

// TestListShare: a key with a listing under way is busy for a second
// one at once, without a List, while another key's is served.
func TestListShare(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	m := NewManager(&fakeRemote{store: store}, Config{})
	defer m.Close()
	ctx := context.Background()
	if !m.takeShare(m.listsBy, "alice") {
		t.Fatal("alice's first listing found her share taken")
	}
	if _, err := m.ListEverywhere(ctx, "alice"); !errors.Is(err, ErrBusy) || store.lists != 0 {
		t.Errorf("alice's second listing: got %v after %d Lists, want ErrBusy without a List", err, store.lists)
	}
	if _, err := m.ListEverywhere(ctx, "bob"); err != nil || store.lists != 1 {
		t.Errorf("bob's listing while alice's is under way: got %v after %d Lists, want it served", err, store.lists)
	}
	m.giveShare(m.listsBy, "alice")
	if _, err := m.ListEverywhere(ctx, "alice"); err != nil || len(m.listsBy.by) != 0 || m.listsBy.taken != 0 {
		t.Errorf("alice's listing once hers ended: got %v with shares %v (%d taken) left, want it served and none left", err, m.listsBy.by, m.listsBy.taken)
	}
}

// TestListPaced: one key listing in a loop makes listBurst Lists of the
// store, then is refused with a *ListPacedError (its wait at most a
// second) without a List, while another key's listing is served.
func TestListPaced(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	m := NewManager(&fakeRemote{store: store}, Config{})
	defer m.Close()
	ctx := context.Background()
	var paced *ListPacedError
	for i := range 100 {
		_, err := m.ListEverywhere(ctx, "alice")
		if errors.As(err, &paced) {
			break
		}
		if err != nil {
			t.Fatalf("alice's listing %d: %v", i, err)
		}
	}
	// The bucket refills at listRate while the loop runs, so a slow
	// machine may allow one or two more.
	if paced == nil || store.lists < listBurst || store.lists > listBurst+2 {
		t.Fatalf("alice listing in a loop: %d Lists, refused %v; want about %d, then a *ListPacedError", store.lists, paced, listBurst)
	}
	if !errors.Is(paced, ErrTooMany) || paced.Wait <= 0 || paced.Wait > time.Second {
		t.Errorf("alice's paced listing: got %v (wait %v), want an ErrTooMany with a wait within a second", paced, paced.Wait)
	}
	lists := store.lists
	if _, err := m.ListEverywhere(ctx, "bob"); err != nil || store.lists != lists+1 {
		t.Errorf("bob's listing while alice is paced: got %v after %d Lists, want it served", err, store.lists-lists)
	}
}

// TestShareHeadroom: keys busy with lookups leave the last of the slots
// to keys holding none. Table: the slots each key already holds, then
// whether one more of a key's is counted (past remoteFinds, the slots
// themselves make it wait).
func TestShareHeadroom(t *testing.T) {
	tests := []struct {
		name string
		held map[string]int
		who  string
		want bool
	}{
		{"first of an idle server", nil, "a", true},
		{"within the share", map[string]int{"a": 3}, "a", true},
		{"past the share", map[string]int{"a": 4}, "a", false},
		{"a busy key into the last free slots", map[string]int{"a": 4, "b": 4, "c": 4, "d": 1}, "d", false},
		{"a key holding none into the last free slots", map[string]int{"a": 4, "b": 4, "c": 4, "d": 1}, "e", true},
		{"a key holding none into the last slot", map[string]int{"a": 4, "b": 4, "c": 4, "d": 1, "e": 1, "f": 1}, "g", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewManager(&fakeRemote{store: &remoteStore{sessions: map[string]RemoteSession{}}}, Config{})
			defer m.Close()
			for who, n := range tt.held {
				m.findsBy.by[who] = n
				m.findsBy.taken += n
			}
			if got := m.takeShare(m.findsBy, tt.who); got != tt.want {
				t.Errorf("%s's slot with %v held: got %v, want %v", tt.who, tt.held, got, tt.want)
			}
		})
	}
}

// TestRemoteCallsTakeContext: every call naming a session another
// server holds waits for its attach only as long as its own request:
// Get, Files, SetNetwork, NetworkEvents, SetExpiry and ResetInterpreter
// each end with context.Canceled once their context ends, while the
// attach (held by a gated Find) goes on.
func TestRemoteCallsTakeContext(t *testing.T) {
	store := &remoteStore{sessions: map[string]RemoteSession{}}
	a := NewManager(&fakeRemote{store: store}, Config{})
	info, err := a.Create(context.Background(), "alice", SessionOptions{Limits: spec.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	defer close(gate)
	store.mu.Lock()
	store.gate = gate
	store.mu.Unlock()
	b := NewManager(&fakeRemote{store: store}, Config{})
	defer b.Close()
	id := info.ID
	calls := map[string]func(context.Context) error{
		"Get":           func(ctx context.Context) error { _, err := b.Get(ctx, "alice", id); return err },
		"Files":         func(ctx context.Context) error { _, err := b.Files(ctx, "alice", id); return err },
		"SetNetwork":    func(ctx context.Context) error { _, err := b.SetNetwork(ctx, "alice", id, nil, nil); return err },
		"NetworkEvents": func(ctx context.Context) error { _, err := b.NetworkEvents(ctx, "alice", id); return err },
		"SetExpiry":     func(ctx context.Context) error { _, err := b.SetExpiry(ctx, "alice", id, time.Hour); return err },
		"ResetInterpreter": func(ctx context.Context) error {
			return b.ResetInterpreter(ctx, "alice", id, "python", "default")
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		testhost.WaitFor(t, "a Find to begin", func() bool {
			store.mu.Lock()
			defer store.mu.Unlock()
			return store.finds > 0
		})
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s whose request ended: got %v, want context.Canceled", name, err)
			}
		case <-time.After(time.Minute): // a bound, not a timing assertion
			t.Fatalf("%s whose request ended still waits for the held attach", name)
		}
	}
}

// TestLookupPanicFreesSlot: a lookup that panics (net/http recovers a
// handler's) gives back its slot of remoteFinds and its share.
func TestLookupPanicFreesSlot(t *testing.T) {
	m := NewManager(&fakeRemote{store: &remoteStore{sessions: map[string]RemoteSession{}}}, Config{})
	defer m.Close()
	func() {
		// The panic is the test's own, and the lookup's error is never
		// returned: it panics.
		defer func() { _ = recover() }()
		_ = m.GuardLookup(context.Background(), "alice", newID(), func(context.Context) error { panic("look") })
	}()

	if len(m.finds) != 0 || m.findsBy.taken != 0 {
		t.Errorf("after a panicking lookup: %d slots and %d shares taken, want none", len(m.finds), m.findsBy.taken)
	}
}
