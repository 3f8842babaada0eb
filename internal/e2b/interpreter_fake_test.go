package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// interpSessions is a fake Sessions for the code interpreter: each Exec
// is recorded and answered by run, and ResetInterpreter is recorded.
type interpSessions struct {
	sandbox.Sessions // the calls this fake does not answer panic (nil)
	mu               sync.Mutex
	execs            []sandbox.ExecRequest
	resets           []string // "language/name"
	// run answers an Exec; nil answers an empty Result.
	run func(ctx context.Context, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error)
	// gone are the session ids Get no longer finds.
	gone map[string]bool
	// lookup, when set, is called by Get first, outside mu.
	lookup func(ctx context.Context, id string)
}

func (f *interpSessions) Create(context.Context, string, sandbox.SessionOptions) (sandbox.Info, error) {
	return sandbox.Info{}, errors.ErrUnsupported
}

func (f *interpSessions) Get(ctx context.Context, owner, id string) (sandbox.Info, error) {
	if f.lookup != nil {
		f.lookup(ctx, id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[id] {
		return sandbox.Info{}, sandbox.ErrNotFound
	}
	return sandbox.Info{ID: id}, nil
}

func (f *interpSessions) List(string) []sandbox.Info { return nil }

func (f *interpSessions) Delete(context.Context, string, string) error { return nil }

func (f *interpSessions) Exec(ctx context.Context, owner, id string, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
	f.mu.Lock()
	f.execs = append(f.execs, req)
	run := f.run
	f.mu.Unlock()
	if run == nil {
		return spec.Result{}, nil
	}
	return run(ctx, req, live)
}

func (f *interpSessions) Files(context.Context, string, string) (workspace.Files, error) {
	return nil, errors.ErrUnsupported
}

func (f *interpSessions) Spawn(context.Context, string, string, interp.Command) (interp.Process, error) {
	return nil, errors.ErrUnsupported
}

func (f *interpSessions) ResetInterpreter(_ context.Context, owner, id, language, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, language+"/"+name)
	return nil
}

// recorded are the execs so far.
func (f *interpSessions) recorded() []sandbox.ExecRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sandbox.ExecRequest(nil), f.execs...)
}

// The sandboxes of the tests: two owners'.
var (
	ciAlice = &Sandbox{ID: "sbx-alice", Owner: "alice", Env: map[string]string{"GLOBAL": "g"}}
	ciBob   = &Sandbox{ID: "sbx-bob", Owner: "bob"}
)

// interpHarness is the interpreter's mux behind a stand-in for the
// router, which puts the sandbox named by the E2b-Sandbox-Id header
// (ciAlice or ciBob) in the request's context.
type interpHarness struct {
	t    *testing.T
	fake *interpSessions
	h    http.Handler
}

func newInterpHarness(t *testing.T, fake *interpSessions) *interpHarness {
	t.Helper()
	return newInterpHarnessWith(t, fake, Config{})
}

// newInterpHarnessWith is newInterpHarness with cfg besides Sessions.
func newInterpHarnessWith(t *testing.T, fake *interpSessions, cfg Config) *interpHarness {
	t.Helper()
	cfg.Sessions = fake
	s := &Server{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	s.interpreterRoutes(mux)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb := ciAlice
		if r.Header.Get(headerSandboxID) == ciBob.ID {
			sb = ciBob
		}
		mux.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), sb)))
	})
	return &interpHarness{t: t, fake: fake, h: h}
}

// do sends one request as sandbox sb and returns the answer.
func (h *interpHarness) do(sb *Sandbox, method, path, body string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set(headerSandboxID, sb.ID)
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, r)
	return w
}

// execute posts body to /execute as alice and returns the lines, after
// checking that every line is one JSON object with a type and none is
// blank.
func (h *interpHarness) execute(body string) []map[string]any {
	h.t.Helper()
	w := h.do(ciAlice, "POST", "/execute", body)
	if w.Code != http.StatusOK {
		h.t.Fatalf("POST /execute %s = %d %q, want 200", body, w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/x-ndjson" {
		h.t.Errorf("Content-Type %q, want application/x-ndjson", ct)
	}
	return parseExecLines(h.t, w.Body.Bytes())
}

// parseExecLines splits an NDJSON body, failing on a blank line, a line that
// is not a JSON object with a type, or a body that does not end in a
// newline.
func parseExecLines(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	if len(body) == 0 || body[len(body)-1] != '\n' {
		t.Fatalf("body %q does not end with a newline", body)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["type"] == nil {
			t.Fatalf("line %q is not a JSON object with a type (%v); the SDK would fail on it", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// lineTypes are the types of lines, in order.
func lineTypes(lines []map[string]any) string {
	var ts []string
	for _, l := range lines {
		ts = append(ts, l["type"].(string))
	}
	return strings.Join(ts, ",")
}
