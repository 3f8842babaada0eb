package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/sandbox/sandboxtest"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// controlFake is an in-memory Sessions and Lifetimes for the control
// plane's and the router's tests: sessions are records, with a clock
// that moves one second per session created, so start times differ.
type controlFake struct {
	sandbox.Sessions // the calls this fake does not answer panic (nil)
	mu               sync.Mutex
	next             int
	sessions         sandboxtest.Records
	// lastOptions is what Create was given last.
	lastOptions sandbox.SessionOptions
	// maxTTL is the ceiling SetExpiry and LifeCaps report.
	maxTTL time.Duration
	// epoch is when the first session starts; each next one a second
	// later.
	epoch time.Time
	// doneCalls counts the Gets and SetExpiries whose context had ended
	// (a request's, its client gone).
	doneCalls int
}

func newControlFake() *controlFake {
	return &controlFake{sessions: sandboxtest.Records{}, maxTTL: 6 * time.Hour, epoch: time.Now().UTC().Truncate(time.Second)}
}

func (f *controlFake) Create(_ context.Context, owner string, o sandbox.SessionOptions) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastOptions = o
	if o.TTL > f.maxTTL {
		return sandbox.Info{}, fmt.Errorf("%w: ttl too long", spec.ErrInvalid)
	}
	f.next++
	start := f.epoch.Add(time.Duration(f.next) * time.Second)
	info := sandbox.Info{
		ID: fmt.Sprintf("ses_%03d", f.next), State: sandbox.StateReady, CreatedAt: start,
		ExpiresAt: start.Add(o.TTL), Limits: o.Limits, Network: o.Network,
	}
	f.sessions[info.ID] = &sandboxtest.Record{Owner: owner, Info: info}
	return info, nil
}

func (f *controlFake) Get(ctx context.Context, owner, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		f.doneCalls++
	}
	return f.sessions.Get(owner, id)
}

func (f *controlFake) List(owner string) []sandbox.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions.List(owner)
}

func (f *controlFake) Delete(_ context.Context, owner, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions.Delete(owner, id)
}

func (f *controlFake) Exec(context.Context, string, string, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, errors.ErrUnsupported
}

func (f *controlFake) Files(context.Context, string, string) (workspace.Files, error) {
	return nil, errors.ErrUnsupported
}

func (f *controlFake) Spawn(context.Context, string, string, interp.Command) (interp.Process, error) {
	return nil, errors.ErrUnsupported
}

func (f *controlFake) SetExpiry(ctx context.Context, owner, id string, ttl time.Duration) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		f.doneCalls++
	}
	s, err := f.sessions.Find(owner, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	if ttl > f.maxTTL {
		return sandbox.Info{}, fmt.Errorf("%w: past the longest life", spec.ErrInvalid)
	}
	s.Info.ExpiresAt = time.Now().Add(ttl)
	return s.Info, nil
}

func (f *controlFake) LifeCaps() (time.Duration, time.Duration) { return f.maxTTL, time.Hour }

// Pause, Snapshot and Resume move a session between ready and paused or
// snapshotted, as the Manager does.
func (f *controlFake) Pause(_ context.Context, owner, id string) (sandbox.Info, error) {
	return f.move(owner, id, sandbox.StatePaused)
}

// Snapshot refuses a request for memory: E2B's only snapshot is its
// keepMemory:false pause, which must keep files only.
func (f *controlFake) Snapshot(_ context.Context, owner, id string, o sandbox.SnapshotOptions) (sandbox.Info, error) {
	if o.Memory {
		return sandbox.Info{}, errors.New("a snapshot with memory for a pause that asked for none")
	}
	return f.move(owner, id, sandbox.StateSnapshotted)
}

func (f *controlFake) Resume(_ context.Context, owner, id string) (sandbox.Info, error) {
	return f.move(owner, id, sandbox.StateReady)
}

func (f *controlFake) move(owner, id string, to sandbox.State) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sessions.Find(owner, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	s.Info.State, s.Info.CopyPaused = to, false
	return s.Info, nil
}

// copyPause pauses a session for a copy behind the front end's back, as
// a native API's snapshot or fork of it does.
func (f *controlFake) copyPause(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[id].Info.State, f.sessions[id].Info.CopyPaused = sandbox.StatePaused, true
}

// setState changes a session behind the front end's back.
func (f *controlFake) setState(id string, st sandbox.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[id].Info.State = st
}

// drop ends a session behind the front end's back, as the reaper does.
func (f *controlFake) drop(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, id)
}

// Test keys and the tenants they stand for.
const (
	ctlKeyAlice = "alice-key"
	ctlKeyBob   = "bob-key"
)

// controlAuth accepts the two test keys, as Warden's key store would.
func controlAuth(_ *http.Request, key string) (string, error) {
	switch key {
	case ctlKeyAlice:
		return "alice", nil
	case ctlKeyBob:
		return "bob", nil
	}
	return "", errors.New("invalid API key")
}

// controlNext answers what the front end passes to Warden's own API.
var controlNext = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusTeapot)
})

// newControlServer is a front end over a fresh fake.
func newControlServer(t testing.TB, mutate func(*Config)) (*Server, *controlFake, http.Handler) {
	t.Helper()
	f := newControlFake()
	cfg := Config{Sessions: f, Lifetimes: f, Authenticate: controlAuth}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, f, s.Handler(controlNext)
}

// call sends one request through h with the API key (if any) and answers
// the recorder.
func controlCall(h http.Handler, method, target, key, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// newControlServerF is newControlServer for a fuzz target.
func newControlServerF(f *testing.F) (*Server, *controlFake, http.Handler) {
	return newControlServer(f, nil)
}

// The real Manager must keep satisfying what the front end needs.
var _ Lifetimes = (*sandbox.Manager)(nil)
