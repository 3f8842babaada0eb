package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fakeBackend builds fakeBoxes and counts the live ones.
type fakeBackend struct {
	mu     sync.Mutex
	live   int
	starts int
	runs   int
	// lastExec is the box that ran the last Exec.
	lastExec *fakeBox
	// holdRuns makes Run last until its context ends.
	holdRuns bool
	// started are the specs Start and Run were given, in order.
	started []spec.Spec
	// execFail, if set, is the result of every box's Exec.
	execFail *spec.Result
}

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Start(_ context.Context, s spec.Spec) (Box, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, s)
	f.live++
	f.starts++
	return &fakeBox{b: f, done: make(chan struct{})}, nil
}

func (f *fakeBackend) Run(ctx context.Context, s spec.Spec, _ io.Reader, _ Stream) (spec.Result, error) {
	f.mu.Lock()
	f.runs++
	f.started = append(f.started, s)
	hold := f.holdRuns
	f.mu.Unlock()
	if hold {
		<-ctx.Done()
		return spec.Result{}, ctx.Err()
	}
	return spec.Result{Stdout: strings.Join(s.Command, " ")}, nil
}

func (f *fakeBackend) alive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

type fakeBox struct {
	b    *fakeBackend
	done chan struct{}
	once sync.Once
	// block makes Exec wait until released or its context ends.
	block chan struct{}
	// ran is the last command Exec ran.
	ran Command
	// err is why the box ended, set before it is closed.
	err error
	// closeErr is what Close returns: what it failed to clean up.
	closeErr error
	// paused says Pause stopped the box; pauseErr is what Pause returns.
	paused   bool
	pauseErr error
	// resumeErr is what Resume returns, having resumed the box all the same.
	resumeErr error
}

func (x *fakeBox) Pause(context.Context) error {
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	if x.pauseErr != nil {
		return x.pauseErr
	}
	x.paused = true
	return nil
}

func (x *fakeBox) Resume(context.Context) error {
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	x.paused = false
	return x.resumeErr
}

// isPaused says Pause stopped the box and no Resume followed.
func (x *fakeBox) isPaused() bool {
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	return x.paused
}

func (x *fakeBox) Spawn(context.Context, interp.Command) (interp.Process, error) {
	return nil, errors.ErrUnsupported
}

func (x *fakeBox) Exec(ctx context.Context, c Command, _ Stream) (spec.Result, error) {
	x.b.mu.Lock()
	x.ran = c
	x.b.lastExec = x
	fail := x.b.execFail
	x.b.mu.Unlock()
	if fail != nil {
		return *fail, nil
	}
	if x.block != nil {
		select {
		case <-x.block:
		case <-ctx.Done():
		}
	}
	return spec.Result{Stdout: strings.Join(c.Argv, " ")}, nil
}

func (x *fakeBox) Env(extra ...string) []string   { return extra }
func (x *fakeBox) Workspace() *os.File            { return nil }
func (x *fakeBox) FileOwner() (int, int)          { return 0, 0 }
func (x *fakeBox) Usage() (time.Duration, uint64) { return 0, 0 }
func (x *fakeBox) Done() <-chan struct{}          { return x.done }
func (x *fakeBox) Err() error                     { return x.err }
func (x *fakeBox) SetNetwork(allow, deny []string) error {
	return nil
}
func (x *fakeBox) NetworkEvents() []spec.NetworkEvent { return nil }
func (x *fakeBox) Close() error {
	x.once.Do(func() {
		x.b.mu.Lock()
		x.b.live--
		x.b.mu.Unlock()
		close(x.done)
	})
	return x.closeErr
}

func newTestManager(t *testing.T, cfg Config) (*Manager, *fakeBackend) {
	t.Helper()
	b := &fakeBackend{}
	m := NewManager(b, cfg)
	t.Cleanup(func() { m.Close() })
	return m, b
}

// sessionOf creates a session of owner's on m with the default options
// and returns it with the Manager's record of it, for the tests that
// reach into a session (its box, interpreters, pacer, copy slots).
func sessionOf(t *testing.T, m *Manager, owner string) (Info, *session) {
	t.Helper()
	info, err := m.Create(context.Background(), owner, defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.lookupCtx(context.Background(), owner, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	return info, s
}

func defaultOptions() SessionOptions {
	return SessionOptions{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
}

func TestManagerLifecycle(t *testing.T) {
	m, b := newTestManager(t, Config{})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	if !strings.HasPrefix(info.ID, "ses_") || len(info.ID) < 26 || info.State != StateReady {
		t.Errorf("Create() = %+v, want a long ses_ id, ready", info)
	}
	r, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"echo", "hi"}}, Stream{})
	if err != nil || r.Stdout != "echo hi" {
		t.Errorf("Exec() = %+v, %v; want the command run", r, err)
	}
	if got, _ := m.Get(context.Background(), "alice", info.ID); got.Execs != 1 || got.State != StateReady {
		t.Errorf("after one exec Get() = %+v, want 1 exec, ready", got)
	}
	if _, err := m.Get(context.Background(), "bob", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's Get() = %v, want ErrNotFound", err)
	}
	if err := m.Delete(ctx, "bob", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's Delete() = %v, want ErrNotFound", err)
	}
	if len(m.List("bob")) != 0 || len(m.List("alice")) != 1 {
		t.Errorf("List() = bob %d, alice %d; want 0 and 1", len(m.List("bob")), len(m.List("alice")))
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	if _, err := m.Get(context.Background(), "alice", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get() after Delete = %v, want ErrNotFound", err)
	}
	if b.alive() != 0 {
		t.Errorf("%d boxes alive after Delete, want 0", b.alive())
	}
}

func TestManagerLimitAndBusy(t *testing.T) {
	m, b := newTestManager(t, Config{MaxSessions: 1})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); !errors.Is(err, ErrTooMany) {
		t.Errorf("second Create() = %v, want ErrTooMany", err)
	}
	if _, err := m.Run(ctx, "alice", defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{}); !errors.Is(err, ErrTooMany) {
		t.Errorf("Run() at the limit = %v, want ErrTooMany", err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	box := s.box.(*fakeBox)
	box.block = make(chan struct{})
	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"sleep"}}, Stream{})
	}()
	<-started
	deadline := time.Now().Add(10 * time.Second)
	for s.currentState() != StateBusy && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}}, Stream{}); !errors.Is(err, ErrBusy) {
		t.Errorf("Exec() while busy = %v, want ErrBusy", err)
	}
	close(box.block)
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("Create() after Delete freed the slot = %v", err)
	}
	_ = b
}

// TestManagerReaper has the reaper end sessions of two owners, one for
// each expiry, and bury a third whose sandbox died (it stays, dead), and
// checks OnReap is told each once, with the owner that created the
// session (the per-tenant metrics count it for that owner).
func TestManagerReaper(t *testing.T) {
	var mu sync.Mutex
	reaped := map[string]int{}
	m, b := newTestManager(t, Config{ReapEvery: 5 * time.Millisecond, OnReap: func(owner, r string) {
		mu.Lock()
		reaped[owner+" "+r]++
		mu.Unlock()
	}})
	ctx := context.Background()
	ttl := defaultOptions()
	ttl.TTL = 20 * time.Millisecond
	idle := defaultOptions()
	idle.IdleTimeout = 20 * time.Millisecond
	for _, c := range []struct {
		owner string
		o     SessionOptions
	}{{"alice", ttl}, {"bob", idle}, {"alice", defaultOptions()}} {
		if _, err := m.Create(ctx, c.owner, c.o); err != nil {
			t.Fatal(err)
		}
	}
	died, _ := m.Create(ctx, "carol", defaultOptions())
	s, _ := m.lookupCtx(context.Background(), "carol", died.ID)
	_ = s.box.Close()
	left := func() int { return len(m.List("alice")) + len(m.List("bob")) }
	dead := func() bool { c := m.List("carol"); return len(c) == 1 && c[0].State == StateDead }
	deadline := time.Now().Add(10 * time.Second)
	for (left() > 1 || !dead()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := left(); n != 1 || !dead() {
		t.Fatalf("%d live sessions left, carol's %+v; want only the one without expiry, and carol's dead", n, m.List("carol"))
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"alice ttl": 1, "bob idle": 1, "carol died": 1}
	if len(reaped) != len(want) {
		t.Errorf("OnReap was told %v, want %v", reaped, want)
	}
	for k, n := range want {
		if reaped[k] != n {
			t.Errorf("OnReap(%s) %d times, want %d (all: %v)", k, reaped[k], n, reaped)
		}
	}
	if b.alive() != 1 {
		t.Errorf("%d boxes alive, want 1", b.alive())
	}
}

func TestManagerPool(t *testing.T) {
	m, b := newTestManager(t, Config{Pool: 2})
	deadline := time.Now().Add(10 * time.Second)
	for b.alive() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	fromAPI := defaultOptions()
	fromAPI.Env, fromAPI.Network.Allow = []string{}, []string{}
	if _, err := m.Create(context.Background(), "alice", fromAPI); err != nil {
		t.Fatal(err)
	}
	for b.alive() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if b.alive() != 3 {
		t.Errorf("%d boxes alive, want 3: one taken from the pool and the pool refilled", b.alive())
	}
	custom := defaultOptions()
	custom.Limits.Pids = 7
	if _, err := m.Create(context.Background(), "alice", custom); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	starts := b.starts
	b.mu.Unlock()
	if starts != 4 {
		t.Errorf("%d starts, want 4: a non-default session is built, not pooled", starts)
	}
}

func TestValidateExec(t *testing.T) {
	tests := []struct {
		name string
		req  ExecRequest
		want string
	}{
		{"command", ExecRequest{Command: []string{"ls"}}, ""},
		{"code", ExecRequest{Language: "python", Code: "1"}, ""},
		{"nothing", ExecRequest{}, "nothing to run"},
		{"both", ExecRequest{Command: []string{"ls"}, Language: "python"}, "not both"},
		{"empty program", ExecRequest{Command: []string{""}}, "command[0] is empty"},
		{"stdin with code", ExecRequest{Language: "python", Code: "1", Stdin: []byte("x")}, "apply to commands"},
		{"bad env", ExecRequest{Command: []string{"ls"}, Env: []string{"NOEQUALS"}}, "KEY=VALUE"},
	}
	for _, tt := range tests {
		err := validateExec(tt.req)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: validateExec() = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, spec.ErrInvalid)):
			t.Errorf("%s: validateExec() = %v, want ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}

func TestManagerPerOwnerLimit(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxSessions: 4, MaxPerOwner: 2})
	ctx := context.Background()
	var first Info
	for i := range 2 {
		info, err := m.Create(ctx, "alice", defaultOptions())
		if err != nil {
			t.Fatalf("alice's session %d: %v", i, err)
		}
		first = info
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "this key") {
		t.Errorf("alice's third Create() = %v, want ErrTooMany for the key", err)
	}
	if _, err := m.Create(ctx, "bob", defaultOptions()); err != nil {
		t.Errorf("bob's Create() = %v, want a session: alice's cap is hers", err)
	}
	if err := m.Delete(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("alice's Create() after a Delete = %v", err)
	}
}

func TestManagerCloseTwice(t *testing.T) {
	m, b := newTestManager(t, Config{})
	if _, err := m.Create(context.Background(), "alice", defaultOptions()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if b.alive() != 0 {
		t.Errorf("%d boxes alive after Close, want 0", b.alive())
	}
	if _, err := m.Create(context.Background(), "alice", defaultOptions()); !errors.Is(err, ErrClosed) {
		t.Errorf("Create() after Close = %v, want ErrClosed", err)
	}
}

func TestRunTakesAPooledBox(t *testing.T) {
	m, b := newTestManager(t, Config{Pool: 1, MaxSessions: 1})
	if !waitUntil(func() bool { return b.alive() == 1 }) {
		t.Fatal("the pool never built its box")
	}
	ctx := context.Background()
	o := defaultOptions()
	o.Env = []string{"A=1"}
	r, err := m.Run(ctx, "alice", o, ExecRequest{Command: []string{"echo", "pooled"}, Timeout: time.Second}, Stream{})
	if err != nil || r.Stdout != "echo pooled" {
		t.Fatalf("Run() = %+v, %v", r, err)
	}
	b.mu.Lock()
	runs, ran := b.runs, b.lastExec
	b.mu.Unlock()
	if runs != 0 || ran == nil {
		t.Fatalf("Run() built a sandbox (%d backend runs) while the pool had one of the same shape", runs)
	}
	if !slices.Equal(ran.ran.Env, []string{"A=1"}) || ran.ran.Timeout != time.Second {
		t.Errorf("the pooled box ran %+v, want env A=1 and a 1s timeout", ran.ran)
	}
	if !waitUntil(func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.starts == 2 && b.live == 1 }) {
		t.Errorf("after the run the pooled box was not thrown away and replaced (starts %d, alive %d)", b.starts, b.alive())
	}
	// The slot comes back with the answer: at MaxSessions 1 the next run
	// is not refused while the used box is thrown away.
	if !waitUntil(func() bool { return b.alive() == 1 }) {
		t.Fatal("the pool did not refill")
	}
	if _, err := m.Run(ctx, "alice", o, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Errorf("a second run right after the first = %v", err)
	}
	o.Limits.MemoryBytes *= 2
	if _, err := m.Run(ctx, "alice", o, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	runs = b.runs
	b.mu.Unlock()
	if runs != 1 {
		t.Errorf("a run with other limits made %d backend runs, want 1 (a pooled box has the pool's limits)", runs)
	}
}

// waitUntil polls cond for up to 5 s.
func waitUntil(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

func TestCloseEndsRunsInFlight(t *testing.T) {
	b := &fakeBackend{holdRuns: true}
	m := NewManager(b, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(context.Background(), "alice", defaultOptions(), ExecRequest{Command: []string{"sleep", "1000"}}, Stream{})
		done <- err
	}()
	if !waitUntil(func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.runs == 1 }) {
		t.Fatal("the run never started")
	}
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a run in flight at Close ended with %v, want it canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the run in flight")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the run ended")
	}
	if _, err := m.Run(context.Background(), "alice", defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run() after Close = %v, want ErrClosed", err)
	}
}
