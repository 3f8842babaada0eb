package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// contextsOf lists sb's contexts.
func contextsOf(t *testing.T, h *interpHarness, sb *Sandbox) []contextJSON {
	t.Helper()
	w := h.do(sb, "GET", "/contexts", "")
	var list []contextJSON
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &list) != nil {
		t.Fatalf("GET /contexts = %d %q, want 200 and a JSON list", w.Code, w.Body)
	}
	return list
}

// createContext creates a context in sb from body and returns it.
func createContext(t *testing.T, h *interpHarness, sb *Sandbox, body string) contextJSON {
	t.Helper()
	w := h.do(sb, "POST", "/contexts", body)
	var c contextJSON
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &c) != nil || c.ID == "" {
		t.Fatalf("POST /contexts %s = %d %q, want 200 and a context", body, w.Code, w.Body)
	}
	return c
}

// TestContextLanguages: the default contexts are of languages interp
// serves, and an unknown language is refused with the one error every
// front end gives (invalid, naming the served languages).
func TestContextLanguages(t *testing.T) {
	for _, l := range defaultContextLanguages {
		if !interp.Known(l) {
			t.Errorf("default context language %q is not one interp serves (%v)", l, interp.Languages())
		}
	}
	_, err := contextLanguage("cobol")
	if want := sandbox.UnknownLanguage("cobol"); err == nil || err.Error() != want.Error() ||
		!errors.Is(err, spec.ErrInvalid) || !errors.Is(err, interp.ErrUnknownLanguage) {
		t.Errorf("contextLanguage(cobol) = %v, want %v", err, want)
	}
}

// TestContextsLifecycle: a created context is listed last and runs in its
// own named interpreter; a restart resets that interpreter and its
// count; a removal resets it and unlists the context, whose id then
// names nothing.
func TestContextsLifecycle(t *testing.T) {
	fake := &interpSessions{}
	h := newInterpHarness(t, fake)
	c := createContext(t, h, ciAlice, `{"language":"js"}`)
	if c.Language != "javascript" || c.Cwd != "/home/user" {
		t.Errorf("created %+v, want javascript in /home/user", c)
	}
	list := contextsOf(t, h, ciAlice)
	if len(list) != 3 || list[2] != c {
		t.Errorf("contexts %+v, want the two defaults, then %+v", list, c)
	}
	for i := 1; i <= 2; i++ {
		lines := h.execute(`{"code":"1","context_id":"` + c.ID + `"}`)
		if lines[0]["execution_count"] != float64(i) {
			t.Errorf("execution %d counted %v", i, lines[0]["execution_count"])
		}
	}
	if req := fake.recorded()[0]; req.Language != "javascript" || req.Interpreter != c.ID {
		t.Errorf("exec %+v, want javascript in the interpreter named %s", req, c.ID)
	}
	if w := h.do(ciAlice, "POST", "/contexts/"+c.ID+"/restart", ""); w.Code != http.StatusOK {
		t.Fatalf("restart = %d %q", w.Code, w.Body)
	}
	if lines := h.execute(`{"code":"1","context_id":"` + c.ID + `"}`); lines[0]["execution_count"] != 1.0 {
		t.Errorf("after a restart the count is %v, want 1", lines[0]["execution_count"])
	}
	if w := h.do(ciAlice, "DELETE", "/contexts/"+c.ID, ""); w.Code != http.StatusOK {
		t.Fatalf("delete = %d %q", w.Code, w.Body)
	}
	if got, want := strings.Join(fake.resets, " "), "javascript/"+c.ID+" javascript/"+c.ID; got != want {
		t.Errorf("resets %q, want %q", got, want)
	}
	if list := contextsOf(t, h, ciAlice); len(list) != 2 {
		t.Errorf("contexts after removal %+v, want the two defaults", list)
	}
	for _, call := range [][2]string{{"POST", "/contexts/" + c.ID + "/restart"}, {"DELETE", "/contexts/" + c.ID}} {
		if w := h.do(ciAlice, call[0], call[1], ""); w.Code != http.StatusNotFound {
			t.Errorf("%s %s of a removed context = %d %q, want 404", call[0], call[1], w.Code, w.Body)
		}
	}
	if w := h.do(ciAlice, "POST", "/execute", `{"code":"1","context_id":"`+c.ID+`"}`); w.Code != http.StatusNotFound {
		t.Errorf("execute in a removed context = %d %q, want 404", w.Code, w.Body)
	}
}

// TestContextsAreTheOwners: another sandbox (another owner's) neither
// lists, runs in, restarts nor removes a sandbox's context.
func TestContextsAreTheOwners(t *testing.T) {
	fake := &interpSessions{}
	h := newInterpHarness(t, fake)
	c := createContext(t, h, ciAlice, `{}`)
	for _, l := range contextsOf(t, h, ciBob) {
		if l.ID == c.ID {
			t.Errorf("bob lists alice's context %s", c.ID)
		}
	}
	calls := [][3]string{
		{"POST", "/execute", `{"code":"1","context_id":"` + c.ID + `"}`},
		{"POST", "/contexts/" + c.ID + "/restart", ""},
		{"DELETE", "/contexts/" + c.ID, ""},
	}
	for _, call := range calls {
		if w := h.do(ciBob, call[0], call[1], call[2]); w.Code != http.StatusNotFound {
			t.Errorf("bob's %s %s = %d %q, want 404", call[0], call[1], w.Code, w.Body)
		}
	}
	if len(fake.recorded()) != 0 || len(fake.resets) != 0 {
		t.Errorf("bob's calls ran %v and reset %v, want nothing", fake.recorded(), fake.resets)
	}
}

// TestContextCwd: a context made with a cwd moves its interpreter there
// at once (failing the creation if it cannot), and again before the
// first execution after its interpreter restarted; /home/user is the
// box's /workspace, where interpreters start, so needs no move.
func TestContextCwd(t *testing.T) {
	fail := false
	fake := &interpSessions{run: func(_ context.Context, req sandbox.ExecRequest, _ sandbox.Stream) (spec.Result, error) {
		if strings.Contains(req.Code, "chdir") && fail {
			return spec.Result{Exception: &spec.Exception{Type: "PermissionError", Message: "denied"}}, nil
		}
		if req.Code == "die" {
			return spec.Result{InterpreterRestarted: true, Signal: "SIGKILL"}, nil
		}
		return spec.Result{}, nil
	}}
	h := newInterpHarness(t, fake)
	createContext(t, h, ciAlice, `{"cwd":"/home/user/sub/.."}`)
	if n := len(fake.recorded()); n != 0 {
		t.Errorf("a context in the home ran %d execs, want none", n)
	}
	c := createContext(t, h, ciAlice, `{"language":"python","cwd":"/home/user/data"}`)
	if c.Cwd != "/home/user/data" {
		t.Errorf("cwd %q, want it as given", c.Cwd)
	}
	h.execute(`{"code":"die","context_id":"` + c.ID + `"}`)
	h.execute(`{"code":"1","context_id":"` + c.ID + `"}`)
	var got []string
	for _, req := range fake.recorded() {
		got = append(got, req.Code)
	}
	chdir := `__import__('os').chdir("/workspace/data")`
	if want := []string{chdir, "die", chdir, "1"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("execs %q, want %q", got, want)
	}
	fail = true
	before := len(contextsOf(t, h, ciAlice))
	w := h.do(ciAlice, "POST", "/contexts", `{"cwd":"/root"}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "PermissionError: denied") {
		t.Errorf("a context in a cwd it cannot enter = %d %q, want 400 saying why", w.Code, w.Body)
	}
	if after := len(contextsOf(t, h, ciAlice)); after != before {
		t.Errorf("%d contexts after a failed creation, want %d", after, before)
	}
	if w := h.do(ciAlice, "POST", "/contexts", `{"cwd":"a\u0000b"}`); w.Code != http.StatusBadRequest {
		t.Errorf("a cwd with a NUL byte = %d %q, want 400", w.Code, w.Body)
	}
}

// TestContextsBounded: a sandbox holds at most maxCodeContexts created
// contexts; past that a creation is refused, saying what to do.
func TestContextsBounded(t *testing.T) {
	h := newInterpHarness(t, &interpSessions{})
	for range maxCodeContexts {
		createContext(t, h, ciAlice, `{"language":"bash"}`)
	}
	w := h.do(ciAlice, "POST", "/contexts", `{"language":"bash"}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "remove one") {
		t.Errorf("context %d = %d %q, want 400 saying to remove one", maxCodeContexts+1, w.Code, w.Body)
	}
	for _, body := range []string{`{"language":"cobol"}`, `{"language":`, `[1]`} {
		if w := h.do(ciBob, "POST", "/contexts", body); w.Code != http.StatusBadRequest {
			t.Errorf("POST /contexts %s = %d %q, want 400", body, w.Code, w.Body)
		}
	}
}

// TestContextRegistryForgetsGoneSandboxes: the contexts of a sandbox
// whose session is gone are dropped once another sandbox is first seen.
func TestContextRegistryForgetsGoneSandboxes(t *testing.T) {
	fake := &interpSessions{gone: map[string]bool{}}
	g := newContextRegistry(fake)
	g.box(ciAlice)
	fake.gone[ciAlice.ID] = true
	g.box(ciBob)
	if _, kept := g.boxes[ciAlice.ID]; kept || len(g.boxes) != 1 {
		t.Errorf("registry holds %d sandboxes (alice's kept: %v), want only bob's", len(g.boxes), kept)
	}
}

// TestContextSweepHoldsNoLock: while the sweep a new sandbox starts
// waits on a slow session lookup, a sandbox already known gets its
// contexts at once.
func TestContextSweepHoldsNoLock(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	fake := &interpSessions{}
	g := newContextRegistry(fake)
	alice := g.box(ciAlice)
	var once sync.Once
	fake.lookup = func(ctx context.Context, _ string) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		g.box(ciBob)
	}()
	<-entered
	got := make(chan *boxContexts, 1)
	go func() { got <- g.box(ciAlice) }()
	select {
	case b := <-got:
		if b != alice {
			t.Errorf("alice's contexts were made again during the sweep")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("alice's contexts waited on the sweep's lookup")
	}
	close(release)
	<-swept
}

// TestSessionsCanResetInterpreters: the Manager has what restarting and
// removing contexts need.
func TestSessionsCanResetInterpreters(t *testing.T) {
	var _ interpreterResetter = (*sandbox.Manager)(nil)
}

// TestContextRemovedWhileRunning: a context removed while it runs code
// has its interpreter reset again once the code ends, as the run may have
// started a fresh one after the removal, which nothing could reach.
func TestContextRemovedWhileRunning(t *testing.T) {
	fake := &interpSessions{}
	h := newInterpHarness(t, fake)
	c := createContext(t, h, ciAlice, `{}`)
	fake.run = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		if w := h.do(ciAlice, "DELETE", "/contexts/"+c.ID, ""); w.Code != http.StatusOK {
			t.Errorf("delete while running = %d %q", w.Code, w.Body)
		}
		return spec.Result{}, nil
	}
	h.execute(`{"code":"1","context_id":"` + c.ID + `"}`)
	if got, want := strings.Join(fake.resets, " "), "python/"+c.ID+" python/"+c.ID; got != want {
		t.Errorf("resets %q, want %q: the removal's and one after the run", got, want)
	}
}

// TestContextCwdRefused: when the Manager refuses the code that enters a
// new context's cwd, the creation answers the Manager's refusal (pacing:
// 429), not a bad request, and leaves no context behind.
func TestContextCwdRefused(t *testing.T) {
	fake := &interpSessions{run: func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		return spec.Result{}, fmt.Errorf("%w: retry in 1s", sandbox.ErrPaced)
	}}
	h := newInterpHarness(t, fake)
	w := h.do(ciAlice, "POST", "/contexts", `{"cwd":"/tmp"}`)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "retry in 1s") {
		t.Errorf("= %d %q, want 429 saying when to retry", w.Code, w.Body)
	}
	if n := len(contextsOf(t, h, ciAlice)); n != 2 {
		t.Errorf("%d contexts, want only the two defaults", n)
	}
}
