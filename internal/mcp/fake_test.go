package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fakeSessions keeps sessions as records and runs every exec through
// exec; Files opens a real workspace over a temporary directory.
type fakeSessions struct {
	sandbox.Sessions // the calls this fake does not answer panic (nil)
	t                *testing.T
	mu               sync.Mutex
	next             int
	// sessions maps an id to its owner.
	sessions map[string]string
	dirs     map[string]*workspace.Dir
	exec     func(req sandbox.ExecRequest) spec.Result
	// execErr, when set, is what every session exec fails with.
	execErr error
	last    sandbox.ExecRequest
	options sandbox.SessionOptions
}

func newFake(t *testing.T) *fakeSessions {
	f := &fakeSessions{t: t, sessions: map[string]string{}, dirs: map[string]*workspace.Dir{},
		exec: func(sandbox.ExecRequest) spec.Result { return spec.Result{Stdout: "out\n"} }}
	t.Cleanup(func() {
		for _, d := range f.dirs {
			d.Close()
		}
	})
	return f
}

func (f *fakeSessions) DefaultLimits() spec.Limits { return spec.DefaultLimits }

// Ceilings are those of a host with a 10 minute timeout ceiling.
func (f *fakeSessions) Ceilings() spec.Ceilings { return spec.Ceilings{Timeout: 10 * time.Minute} }

// LifeCaps are the flags' defaults.
func (f *fakeSessions) LifeCaps() (ttl, idle time.Duration) {
	return sandbox.DefaultMaxTTL, sandbox.DefaultMaxIdle
}

func (f *fakeSessions) Create(_ context.Context, owner string, o sandbox.SessionOptions) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.options = o
	if o.Template != "" && o.Template != "pandas" {
		return sandbox.Info{}, fmt.Errorf("%w: template %q is not in the store", spec.ErrInvalid, o.Template)
	}
	f.next++
	id := fmt.Sprintf("ses_%d", f.next)
	f.sessions[id] = owner
	return sandbox.Info{ID: id, State: sandbox.StateReady, Limits: o.Limits, Network: o.Network,
		IdleTimeout: 10 * time.Minute, ExpiresAt: time.Now().Add(time.Hour), Template: o.Template}, nil
}

func (f *fakeSessions) lookup(owner, id string) error {
	if o, ok := f.sessions[id]; !ok || o != owner {
		return fmt.Errorf("%w: no session %q", sandbox.ErrNotFound, id)
	}
	return nil
}

func (f *fakeSessions) Get(_ context.Context, owner, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sandbox.Info{ID: id, Limits: spec.Limits{Timeout: 30 * time.Second}}, f.lookup(owner, id)
}

func (f *fakeSessions) Delete(_ context.Context, owner, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(owner, id); err != nil {
		return err
	}
	delete(f.sessions, id)
	return nil
}

func (f *fakeSessions) Exec(_ context.Context, owner, id string, req sandbox.ExecRequest, _ sandbox.Stream) (spec.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(owner, id); err != nil {
		return spec.Result{}, err
	}
	f.last = req
	if f.execErr != nil {
		return spec.Result{}, f.execErr
	}
	return f.exec(req), nil
}

func (f *fakeSessions) Run(_ context.Context, _ string, o sandbox.SessionOptions, req sandbox.ExecRequest, _ sandbox.Stream) (spec.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.options = req, o
	return f.exec(req), nil
}

func (f *fakeSessions) Files(_ context.Context, owner, id string) (workspace.Files, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(owner, id); err != nil {
		return nil, err
	}
	if d := f.dirs[id]; d != nil {
		return d, nil
	}
	p := filepath.Join(f.t.TempDir(), id)
	if err := os.Mkdir(p, 0o755); err != nil {
		return nil, err
	}
	d, err := workspace.Open(p, os.Getuid(), os.Getgid(), workspace.Limits{})
	if err != nil {
		return nil, err
	}
	f.dirs[id] = d
	return d, nil
}

// owned lists the ids of owner's sessions.
func (f *fakeSessions) owned(owner string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, o := range f.sessions {
		if o == owner {
			ids = append(ids, id)
		}
	}
	return ids
}

// testTimeout bounds every wait of these tests.
const testTimeout = 60 * time.Second

// connect serves m to an in-memory client through Run, and returns the
// client session and a channel that delivers Run's error once the client
// has gone.
func connect(t *testing.T, m sandbox.Sessions, opts Options) (*sdk.ClientSession, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	st, ct := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, m, opts, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, done
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", tool, args, err)
	}
	return res
}

// text is the text of a result's first content, which is always text.
func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("result has no content")
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("first content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// listTools is what a client connected to a server over a fake Manager
// lists.
func listTools(t *testing.T) *sdk.ListToolsResult {
	t.Helper()
	cs, _ := connect(t, newFake(t), Options{Owner: "mcp"})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return list
}
