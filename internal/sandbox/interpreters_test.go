package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// recordingInterp is an interpreter that keeps the code it ran and
// whether it was closed.
type recordingInterp struct {
	mu     sync.Mutex
	codes  []string
	closed bool
}

func (r *recordingInterp) Run(_ context.Context, code string, _, _ io.Writer) (interp.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes = append(r.codes, code)
	return interp.Outcome{Value: code}, nil
}

func (r *recordingInterp) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// namedSession is a session of alice's whose bash interpreters, the
// default one and the one named "a", are recordingInterps.
func namedSession(t *testing.T) (*Manager, Info, *session, map[string]*recordingInterp) {
	t.Helper()
	m, _ := newTestManager(t, Config{})
	info, s := sessionOf(t, m, "alice")
	fakes := map[string]*recordingInterp{"": {}, "a": {}}
	s.mu.Lock()
	s.interps = map[string]interp.Interpreter{"bash": fakes[""], "bash/a": fakes["a"]}
	s.mu.Unlock()
	return m, info, s, fakes
}

// TestNamedInterpretersAreSeparate: an exec naming an interpreter runs in
// that one, an exec naming none in the default one, and resetting one
// closes and forgets only it.
func TestNamedInterpretersAreSeparate(t *testing.T) {
	m, info, s, fakes := namedSession(t)
	ctx := context.Background()
	for _, name := range []string{"", "a", "a", ""} {
		req := ExecRequest{Language: "bash", Code: "in " + name, Interpreter: name}
		if r, err := m.Exec(ctx, "alice", info.ID, req, Stream{}); err != nil || r.Value != req.Code {
			t.Fatalf("exec in %q = %+v, %v; want its code as the value", name, r, err)
		}
	}
	for name, f := range fakes {
		if got, want := strings.Join(f.codes, ","), "in "+name+",in "+name; got != want {
			t.Errorf("interpreter %q ran %q, want %q", name, got, want)
		}
	}
	if err := m.ResetInterpreter(context.Background(), "alice", info.ID, "bash", "a"); err != nil {
		t.Fatalf("ResetInterpreter(a) = %v", err)
	}
	if !fakes["a"].closed || fakes[""].closed {
		t.Errorf("after resetting a: a closed %v, default closed %v; want only a closed", fakes["a"].closed, fakes[""].closed)
	}
	s.mu.Lock()
	_, kept := s.interps["bash/a"]
	s.mu.Unlock()
	if kept {
		t.Errorf("a reset interpreter is still kept; want it forgotten so the next exec starts afresh")
	}
	if err := m.ResetInterpreter(context.Background(), "alice", info.ID, "bash", "never-used"); err != nil {
		t.Errorf("resetting an interpreter never used = %v, want nil", err)
	}
	if err := m.ResetInterpreter(context.Background(), "bob", info.ID, "bash", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's reset = %v, want ErrNotFound", err)
	}
}

// TestInterpreterNamesAreChecked: names are short and plain, only for
// code, and a session holds a bounded number of named interpreters.
func TestInterpreterNamesAreChecked(t *testing.T) {
	m, info, s, _ := namedSession(t)
	ctx := context.Background()
	bad := []ExecRequest{
		{Language: "bash", Code: "1", Interpreter: "a/b"},
		{Language: "bash", Code: "1", Interpreter: "a b"},
		{Language: "bash", Code: "1", Interpreter: strings.Repeat("x", maxInterpreterName+1)},
		{Command: []string{"true"}, Interpreter: "a"},
	}
	for _, req := range bad {
		if _, err := m.Exec(ctx, "alice", info.ID, req, Stream{}); !errors.Is(err, spec.ErrInvalid) {
			t.Errorf("exec %+v = %v, want ErrInvalid", req, err)
		}
	}
	if err := m.ResetInterpreter(context.Background(), "alice", info.ID, "bash", "../x"); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("reset of a bad name = %v, want ErrInvalid", err)
	}
	s.mu.Lock()
	for i := len(s.interps) - 1; i < MaxNamedInterpreters; i++ {
		s.interps[fmt.Sprintf("python/n%d", i)] = &recordingInterp{}
	}
	s.mu.Unlock()
	_, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Language: "bash", Code: "1", Interpreter: "one-more"}, Stream{})
	if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "reset one") {
		t.Errorf("exec past %d named interpreters = %v, want ErrInvalid saying to reset one", MaxNamedInterpreters, err)
	}
	if _, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Language: "bash", Code: "1", Interpreter: "a"}, Stream{}); err != nil {
		t.Errorf("exec in an existing named interpreter at the cap = %v, want it run", err)
	}
}
