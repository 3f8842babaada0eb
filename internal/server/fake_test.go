package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/sandbox/sandboxtest"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fakeSessions is an in-memory Sessions: sessions are records, an exec
// runs the exec hook (by default it writes to both streams and returns a
// Result), and Files opens a real workspace.Dir over a temporary directory.
type fakeSessions struct {
	sandbox.Sessions // the calls this fake does not answer panic (nil)
	mu               sync.Mutex
	root             string
	max              int
	next             int
	sessions         sandboxtest.Records
	dirs             map[string]*workspace.Dir
	// err, when set, is what every call that can fail returns.
	err error
	// exec replaces the default exec behaviour.
	exec func(ctx context.Context, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error)
	// lastExec and lastOptions are what the server passed last.
	lastExec    sandbox.ExecRequest
	lastOptions sandbox.SessionOptions
	// lastFork is what the server asked of the last Fork.
	lastFork sandbox.ForkOptions
}

func newFake(root string) *fakeSessions {
	return &fakeSessions{root: root, max: 4, sessions: sandboxtest.Records{}, dirs: map[string]*workspace.Dir{}}
}

func (f *fakeSessions) Create(_ context.Context, owner string, o sandbox.SessionOptions) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastOptions = o
	if f.err != nil {
		return sandbox.Info{}, f.err
	}
	if len(f.sessions) >= f.max {
		return sandbox.Info{}, sandbox.ErrTooMany
	}
	if err := fakeResolve(o.Template); err != nil {
		return sandbox.Info{}, err
	}
	f.next++
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	info := sandbox.Info{
		ID:          fmt.Sprintf("ses_%022d", f.next),
		State:       sandbox.StateReady,
		CreatedAt:   now,
		LastUsedAt:  now,
		ExpiresAt:   now.Add(time.Hour),
		IdleTimeout: 10 * time.Minute,
		Limits:      o.Limits,
		Network:     o.Network,
		Template:    o.Template,
	}
	f.sessions[info.ID] = &sandboxtest.Record{Owner: owner, Info: info}
	return info, nil
}

// lookup returns owner's session id, or f.err when set; another
// owner's session is missing.
func (f *fakeSessions) lookup(owner, id string) (*sandboxtest.Record, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.sessions.Find(owner, id)
}

func (f *fakeSessions) Get(_ context.Context, owner, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return sandbox.Info{}, f.err
	}
	return f.sessions.Get(owner, id)
}

func (f *fakeSessions) ListEverywhere(_ context.Context, owner string) ([]sandbox.Info, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.List(owner), nil
}

func (f *fakeSessions) List(owner string) []sandbox.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions.List(owner)
}

func (f *fakeSessions) Delete(_ context.Context, owner, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	return f.sessions.Delete(owner, id)
}

func (f *fakeSessions) Exec(ctx context.Context, owner, id string, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
	f.mu.Lock()
	s, err := f.lookup(owner, id)
	if err == nil {
		if s.Info.State == sandbox.StateBusy {
			err = sandbox.ErrBusy
		} else {
			s.Info.Execs++
		}
	}
	f.lastExec = req
	exec := f.exec
	f.mu.Unlock()
	if err != nil {
		return spec.Result{}, err
	}
	if exec != nil {
		return exec(ctx, req, live)
	}
	return echo(live)
}

// echo is the default exec: one chunk to stdout, one to stderr.
func echo(live sandbox.Stream) (spec.Result, error) {
	if live.Stdout != nil {
		_, _ = io.WriteString(live.Stdout, "out\n")
	}
	if live.Stderr != nil {
		_, _ = io.WriteString(live.Stderr, "err\n")
	}
	return spec.Result{Stdout: "out\n", Stderr: "err\n", WallTimeMS: 1.5}, nil
}

func (f *fakeSessions) Files(_ context.Context, owner, id string) (workspace.Files, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.lookup(owner, id); err != nil {
		return nil, err
	}
	if d := f.dirs[id]; d != nil {
		return d, nil
	}
	path := filepath.Join(f.root, id)
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, err
	}
	d, err := workspace.Open(path, os.Getuid(), os.Getgid(), workspace.Limits{})
	if err != nil {
		return nil, err
	}
	f.dirs[id] = d
	return d, nil
}

func (f *fakeSessions) Run(ctx context.Context, _ string, o sandbox.SessionOptions, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
	f.mu.Lock()
	f.lastOptions, f.lastExec = o, req
	err, exec := f.err, f.exec
	f.mu.Unlock()
	if err == nil {
		err = fakeResolve(o.Template)
	}
	if err != nil {
		return spec.Result{}, err
	}
	if exec != nil {
		return exec(ctx, req, live)
	}
	return echo(live)
}

func (f *fakeSessions) DefaultLimits() spec.Limits { return spec.DefaultLimits }

func (f *fakeSessions) Counts() map[sandbox.State]int {
	return f.counts(func(*sandboxtest.Record) bool { return true })
}

func (f *fakeSessions) CountsOf(owner string) map[sandbox.State]int {
	return f.counts(func(s *sandboxtest.Record) bool { return s.Owner == owner })
}

func (f *fakeSessions) counts(keep func(*sandboxtest.Record) bool) map[sandbox.State]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[sandbox.State]int{}
	for _, s := range f.sessions {
		if keep(s) {
			counts[s.Info.State]++
		}
	}
	return counts
}

// setState moves a session to st (to make it busy, say).
func (f *fakeSessions) setState(id string, st sandbox.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[id].Info.State = st
}

func (f *fakeSessions) closeDirs() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, d := range f.dirs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

func (f *fakeSessions) SetNetwork(_ context.Context, owner, id string, allow, deny []string) (sandbox.Info, error) {
	info, err := f.Get(context.Background(), owner, id)
	if err != nil {
		return info, err
	}
	info.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow, Deny: deny}
	return info, nil
}

func (f *fakeSessions) NetworkEvents(_ context.Context, owner, id string) ([]spec.NetworkEvent, error) {
	if _, err := f.Get(context.Background(), owner, id); err != nil {
		return nil, err
	}
	return []spec.NetworkEvent{{Method: "CONNECT", Host: "pypi.org", Port: 443, Allowed: true, Reason: "allowed by pypi.org"}}, nil
}

// fakeResolve refuses a template other than the host's and "pandas" as
// the Manager refuses a name its store lacks.
func fakeResolve(name string) error {
	switch name {
	case "", sandbox.HostTemplate, "pandas":
		return nil
	}
	return fmt.Errorf("%w: %w %q: see warden template ls", spec.ErrInvalid, template.ErrNotFound, name)
}

// fakeTemplates is a sandbox.Templates with fixed contents.
type fakeTemplates struct {
	infos []sandbox.TemplateInfo
	err   error
	// only maps a template to the one owner that may use it (absent:
	// every owner's).
	only map[string]string
}

func (f fakeTemplates) Resolve(name, _ string) (spec.Root, func(), error) {
	if err := fakeResolve(name); err != nil {
		return spec.Root{}, nil, err
	}
	return spec.Root{Template: name, Dir: "/nonexistent/" + name}, func() {}, nil
}

func (f fakeTemplates) List(owner string) ([]sandbox.TemplateInfo, error) {
	return slices.DeleteFunc(slices.Clone(f.infos), func(i sandbox.TemplateInfo) bool {
		o, mine := f.only[i.Name]
		return mine && o != owner
	}), f.err
}
