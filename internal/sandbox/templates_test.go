package sandbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// fakeTemplates serves templates from a map and counts the leases held.
type fakeTemplates struct {
	mu     sync.Mutex
	roots  map[string]spec.Root
	leases map[string]int
	// only maps a template to the one owner that may use it (absent:
	// every owner's).
	only map[string]string
}

func newFakeTemplates(roots ...spec.Root) *fakeTemplates {
	f := &fakeTemplates{roots: map[string]spec.Root{}, leases: map[string]int{}}
	for _, r := range roots {
		f.roots[r.Template] = r
	}
	return f
}

func (f *fakeTemplates) Resolve(name, owner string) (spec.Root, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.roots[name]
	if o, mine := f.only[name]; !ok || mine && o != owner {
		return spec.Root{}, nil, fmt.Errorf("%w %q: see warden template ls", template.ErrNotFound, name)
	}
	f.leases[name]++
	var once sync.Once
	return r, func() {
		once.Do(func() {
			f.mu.Lock()
			f.leases[name]--
			f.mu.Unlock()
		})
	}, nil
}

func (f *fakeTemplates) List(string) ([]TemplateInfo, error) { return nil, nil }

func (f *fakeTemplates) held(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases[name]
}

// pyRoot is a template root holding python3 alone.
func pyRoot(t *testing.T) spec.Root {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/python3"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	return spec.Root{Template: "py", Dir: dir, Digest: "sha256:ab", Env: []string{"PATH=/usr/bin"}}
}

// TestSessionTemplateLease: a session on a template runs on its root,
// reports it, and holds its lease exactly as long as its box lives:
// released at Delete, at the box's death, and at once for a refused
// or finished one-shot run.
func TestSessionTemplateLease(t *testing.T) {
	ts := newFakeTemplates(pyRoot(t))
	m, b := newTestManager(t, Config{Templates: ts, ReapEvery: 5 * time.Millisecond})
	ctx := context.Background()
	o := defaultOptions()
	o.Template = "py"
	info, err := m.Create(ctx, "alice", o)
	if err != nil {
		t.Fatalf("Create on a template: %v", err)
	}
	if info.Template != "py" || b.started[len(b.started)-1].Root.Dir != ts.roots["py"].Dir {
		t.Errorf("Info.Template = %q, backend root %+v; want py and its root", info.Template, b.started[len(b.started)-1].Root)
	}
	if got := ts.held("py"); got != 1 {
		t.Errorf("leases while the session lives = %d, want 1", got)
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	if got := ts.held("py"); got != 0 {
		t.Errorf("leases after Delete = %d, want 0", got)
	}

	info, err = m.Create(ctx, "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	_ = s.box.Close() // the sandbox dies on its own
	waitFor(t, "the dead session's lease to be released", func() bool { return ts.held("py") == 0 })
	if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateDead || got.Template != "py" {
		t.Errorf("after its box died: %+v, want dead on py", got)
	}

	if _, err := m.Run(ctx, "alice", o, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Fatal(err)
	}
	if got := ts.held("py"); got != 0 || b.started[len(b.started)-1].Root.Template != "py" {
		t.Errorf("after a run on py: %d leases, root %+v; want 0 and py's", got, b.started[len(b.started)-1].Root)
	}
	host := defaultOptions()
	host.Template = HostTemplate
	if info, err := m.Create(ctx, "alice", host); err != nil || info.Template != "" {
		t.Errorf("Create on %q: %+v, %v; want the host's root", HostTemplate, info, err)
	}
}

// TestSessionTemplateRefusals: unknown templates, a server with no store
// and a language the template lacks are refused in one line that says
// what to do.
func TestSessionTemplateRefusals(t *testing.T) {
	ctx := context.Background()
	o := defaultOptions()
	o.Template = "nope"
	m, _ := newTestManager(t, Config{Templates: newFakeTemplates(pyRoot(t))})
	bare, _ := newTestManager(t, Config{})
	tests := []struct {
		name string
		err  func() error
		is   error
		want string
	}{
		{"unknown", func() error { _, err := m.Create(ctx, "a", o); return err }, spec.ErrInvalid, "warden template ls"},
		{"unknown run", func() error {
			_, err := m.Run(ctx, "a", o, ExecRequest{Command: []string{"true"}}, Stream{})
			return err
		}, spec.ErrInvalid, `no template "nope"`},
		{"no store", func() error { _, err := bare.Create(ctx, "a", o); return err }, spec.ErrInvalid, "no template store"},
		{"no node", func() error {
			py := defaultOptions()
			py.Template = "py"
			info, err := m.Create(ctx, "a", py)
			if err != nil {
				return err
			}
			_, err = m.Exec(ctx, "a", info.ID, ExecRequest{Language: "javascript", Code: "1"}, Stream{})
			return err
		}, ErrUnsupported, `template "py" has no javascript interpreter: it offers python`},
		{"no node run", func() error {
			py := defaultOptions()
			py.Template = "py"
			_, err := m.Run(ctx, "a", py, ExecRequest{Language: "javascript", Code: "1"}, Stream{})
			return err
		}, ErrUnsupported, `template "py" has no javascript interpreter: it offers python`},
	}
	for _, tt := range tests {
		err := tt.err()
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line wrapping %v containing %q", tt.name, err, tt.is, tt.want)
		}
	}
}

// TestRecoveredSessionTemplateGone: a recovered session re-resolves its
// template, and its reason says when the template is gone.
func TestRecoveredSessionTemplateGone(t *testing.T) {
	st, a, b := crashedStore(t)
	a.Template, b.Template = "py", "gone"
	st.records[a.ID], st.records[b.ID] = a, b
	ts := newFakeTemplates(pyRoot(t))
	m, _ := newStoreManager(t, st, Config{Templates: ts})
	if got, _ := m.Get(context.Background(), "alice", a.ID); got.Template != "py" || strings.Contains(got.Reason, "template") {
		t.Errorf("alice's session on a stored template: %+v, want py, no word of the template", got)
	}
	if got, _ := m.Get(context.Background(), "bob", b.ID); got.Template != "gone" || !strings.Contains(got.Reason, `its template "gone" is gone`) {
		t.Errorf("bob's session on a removed template: %+v, want its reason to say so", got)
	}
	if ts.held("py") != 0 {
		t.Errorf("recovery kept a lease on py")
	}
	if rec := st.records[a.ID]; rec.Template != "py" {
		t.Errorf("the record lost its template: %+v", rec)
	}
}

// TestRecordKeepsTemplateDigest: a session's record keeps the digest of
// its template as it started, and a recovered one keeps it again, so
// warden template commit can refuse a base replaced under its name.
func TestRecordKeepsTemplateDigest(t *testing.T) {
	st := newFakeStore(t)
	m, _ := newStoreManager(t, st, Config{Templates: newFakeTemplates(pyRoot(t))})
	o := defaultOptions()
	o.Template = "py"
	info, err := m.Create(context.Background(), "alice", o)
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	if got := st.records[info.ID].TemplateDigest; got != "sha256:ab" {
		t.Errorf("the record's template digest: got %q, want %q", got, "sha256:ab")
	}
	rec := m.revive(st.records[info.ID], time.Now())
	if got := m.record(rec).TemplateDigest; got != "sha256:ab" {
		t.Errorf("a recovered session's template digest: got %q, want %q", got, "sha256:ab")
	}
}

// brokenTemplates is a store whose every lookup fails on its own side.
type brokenTemplates struct{}

func (brokenTemplates) Resolve(string, string) (spec.Root, func(), error) {
	return spec.Root{}, nil, errors.New("reading the store: disk on fire")
}

func (brokenTemplates) List(string) ([]TemplateInfo, error) { return nil, nil }

// TestResolveTemplateErrors: only a template the store does not hold is
// the client's mistake (spec.ErrInvalid, a 400); the store's own failure
// is not, so it is no 400.
func TestResolveTemplateErrors(t *testing.T) {
	tests := []struct {
		name    string
		ts      Templates
		invalid bool
	}{
		{"not in the store", newFakeTemplates(pyRoot(t)), true},
		{"store failure", brokenTemplates{}, false},
	}
	for _, tt := range tests {
		m, _ := newTestManager(t, Config{Templates: tt.ts})
		_, _, err := m.resolveTemplate("nope", "alice")
		if err == nil || errors.Is(err, spec.ErrInvalid) != tt.invalid {
			t.Errorf("%s: resolveTemplate = %v, want an error, spec.ErrInvalid %v", tt.name, err, tt.invalid)
		}
	}
}

// TestSessionTemplateOwner: a template only alice may use is, to bob, a
// template that does not exist: Create and Run refuse it with the very
// error an unknown name gets, and take no lease.
func TestSessionTemplateOwner(t *testing.T) {
	ts := newFakeTemplates(pyRoot(t))
	ts.only = map[string]string{"py": "alice"}
	m, _ := newTestManager(t, Config{Templates: ts})
	ctx := context.Background()
	named := func(name string) SessionOptions {
		o := defaultOptions()
		o.Template = name
		return o
	}
	info, err := m.Create(ctx, "alice", named("py"))
	if err != nil {
		t.Fatalf("Create by alice on her template: %v", err)
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	run := ExecRequest{Command: []string{"true"}}
	for _, tc := range []struct {
		name string
		call func(template string) error
	}{
		{"Create", func(n string) error { _, err := m.Create(ctx, "bob", named(n)); return err }},
		{"Run", func(n string) error { _, err := m.Run(ctx, "bob", named(n), run, Stream{}); return err }},
	} {
		hidden, missing := tc.call("py"), tc.call("py2")
		if hidden == nil || missing == nil {
			t.Fatalf("%s by bob: hidden %v, missing %v; want both refused", tc.name, hidden, missing)
		}
		want := strings.ReplaceAll(missing.Error(), `"py2"`, `"py"`)
		if hidden.Error() != want || !errors.Is(hidden, spec.ErrInvalid) {
			t.Errorf("%s by bob on alice's template = %q, want the unknown name's %q (spec.ErrInvalid)", tc.name, hidden, want)
		}
	}
	if got := ts.held("py"); got != 0 {
		t.Errorf("leases after bob's refusals = %d, want 0", got)
	}
}

// TestTemplateName: answers name the host's root "host", as requests do.
func TestTemplateName(t *testing.T) {
	for in, want := range map[string]string{"": "host", "host": "host", "datasci": "datasci"} {
		if got := TemplateName(in); got != want {
			t.Errorf("TemplateName(%q) = %q, want %q", in, got, want)
		}
	}
}
