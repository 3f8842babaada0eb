package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// The code interpreter is what E2B's code-interpreter template serves on
// port 49999 and @e2b/code-interpreter's runCode and *CodeContext calls
// talk to: POST /execute streams one execution as NDJSON lines, and
// /contexts creates, lists, restarts and removes code contexts. Code runs
// in the session's persistent interpreters (package interp) through
// Sessions.Exec, so it keeps Warden's limits and pacing; it is not
// recorded in the server's exec metrics (warden_execs_total and the
// like), which count only Warden's own API, as README.md says.
//
// Errors answer as E2B's server does: a status and a one-line plain-text
// body (the SDK shows a 404's body and turns a 502 into a TimeoutError).

// Bounds on request bodies.
const (
	// maxExecuteBody bounds POST /execute: Warden's own API takes JSON
	// bodies of up to 8 MiB.
	maxExecuteBody = 8 << 20
	// maxContextBody bounds POST /contexts ({language, cwd}).
	maxContextBody = 64 << 10
	// maxEnvVars bounds the env_vars of one execution.
	maxEnvVars = 256
	// maxBusyWait bounds how long an execution waits for its session to
	// finish an exec started elsewhere (Warden's own API on the same
	// session) before it answers 503.
	maxBusyWait = 10 * time.Minute
	// cleanupTimeout bounds the code run after a client's code to undo
	// its env_vars, which runs even when the client has gone.
	cleanupTimeout = 30 * time.Second
)

// interpreterResetter is what contexts' restart and removal need of
// Sessions beyond the shared interface: *sandbox.Manager has it (a test
// checks), and without it those two calls answer 501.
type interpreterResetter interface {
	ResetInterpreter(ctx context.Context, owner, id, language, name string) error
}

// codeInterpreter serves the interpreter's routes for one Server.
type codeInterpreter struct {
	sessions sandbox.Sessions
	reset    interpreterResetter // nil when Sessions cannot reset
	log      *slog.Logger
	contexts *contextRegistry
	// readBody is Config.ReadBody: nil reads bodies within their limit
	// alone.
	readBody func(w http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error)
}

// interpreterRoutes serves the code interpreter's /execute and /contexts
// on mux.
func (s *Server) interpreterRoutes(mux *http.ServeMux) {
	ci := &codeInterpreter{sessions: s.cfg.Sessions, log: s.log, contexts: newContextRegistry(s.cfg.Sessions), readBody: s.cfg.ReadBody}
	if ci.log == nil {
		ci.log = slog.Default()
	}
	ci.reset, _ = s.cfg.Sessions.(interpreterResetter)
	mux.HandleFunc("POST /execute", ci.execute)
	mux.HandleFunc("GET /contexts", ci.listContexts)
	mux.HandleFunc("POST /contexts", ci.createContext)
	mux.HandleFunc("POST /contexts/{id}/restart", ci.restartContext)
	mux.HandleFunc("DELETE /contexts/{id}", ci.removeContext)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, "OK")
	})
}

// executeJSON is POST /execute's body as the SDK sends it. Unknown fields
// are ignored, as E2B's server ignores them.
type executeJSON struct {
	Code      *string           `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// contextJSON is a context as E2B's API shows it.
type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// createContextJSON is POST /contexts's body.
type createContextJSON struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// execute runs code in a context and streams what it does.
func (ci *codeInterpreter) execute(w http.ResponseWriter, r *http.Request) {
	var body executeJSON
	sb, ok := ci.sandboxBody(w, r, "execute", maxExecuteBody, &body)
	if !ok {
		return
	}
	if err := checkExecute(body); err != nil {
		interpError(w, http.StatusBadRequest, err.Error())
		return
	}
	b := ci.contexts.box(sb)
	select {
	case b.turn <- struct{}{}:
	case <-r.Context().Done():
		return // the client left while it waited
	}
	defer func() { <-b.turn }()
	c, status, err := ci.executeContext(sb, body)
	if err != nil {
		interpError(w, status, err.Error())
		return
	}
	ci.run(w, r, sb, c, *body.Code, body.EnvVars)
	ci.forgetRemoved(sb, c)
}

// forgetRemoved frees the interpreter of a named context removed while
// it ran code: the removal reset the interpreter, but the run may have
// started a new one after it, which nothing could reach again.
func (ci *codeInterpreter) forgetRemoved(sb *Sandbox, c *codeContext) {
	if !c.named || ci.reset == nil || ci.contexts.byID(sb, c.id) != nil {
		return
	}
	// A cleanup after the run, which no request waits for.
	if err := ci.reset.ResetInterpreter(context.Background(), sb.Owner, sb.ID, c.language, c.id); err != nil {
		ci.log.Warn("e2b: freeing the interpreter of a removed context", "sandbox", sb.ID, "err", err)
	}
}

// checkExecute checks what POST /execute's body asks for on its own.
func checkExecute(body executeJSON) error {
	switch {
	case body.Code == nil:
		return errors.New(`code is missing: send {"code": "..."}`)
	case body.ContextID != "" && body.Language != "":
		return errors.New("Only one of context_id or language can be provided")
	case len(body.EnvVars) > maxEnvVars:
		return fmt.Errorf("env_vars has %d variables, more than the %d allowed", len(body.EnvVars), maxEnvVars)
	}
	for k, v := range body.EnvVars {
		if err := checkExecEnvVar(k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkExecEnvVar checks one of env_vars: a shell variable name, a value
// without NUL bytes (no environment can hold one).
func checkExecEnvVar(k, v string) error {
	ok := k != "" && len(k) <= 256
	for i, c := range k {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			ok = false
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("env_vars name %s is not a variable name: use letters, digits and '_', not starting with a digit", interpQuote(k, 64))
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("env_vars %s holds a NUL byte, which no environment can: remove it", k)
	}
	return nil
}

// executeContext is the context an execution names: by id, or the
// default one of its language (Python when it names neither).
func (ci *codeInterpreter) executeContext(sb *Sandbox, body executeJSON) (*codeContext, int, error) {
	if body.ContextID != "" {
		c := ci.contexts.byID(sb, body.ContextID)
		if c == nil {
			return nil, http.StatusNotFound, fmt.Errorf("Context %s not found", interpQuote(body.ContextID, 64))
		}
		return c, 0, nil
	}
	lang, err := contextLanguage(body.Language)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	return ci.contexts.defaultFor(sb, lang), 0, nil
}

// run runs the client's code in c, with this sandbox's turn held: first
// what c needs (its directory, env_vars), then the code with its output
// streamed, then the env_vars undone.
func (ci *codeInterpreter) run(w http.ResponseWriter, r *http.Request, sb *Sandbox, c *codeContext, code string, env map[string]string) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if err := ci.prepare(ctx, sb, c, env); err != nil {
		ci.refuse(w, err)
		return
	}
	if len(env) > 0 {
		defer ci.undoEnv(r.Context(), sb, c, env)
	}
	ci.contexts.mu.Lock()
	count := c.count + 1
	ci.contexts.mu.Unlock()
	stream := newExecStream(w, cancel, execCountLine{Type: "number_of_executions", Count: count})
	stopTicks := stream.startTicks()
	req := sandbox.ExecRequest{Language: c.language, Code: code, Interpreter: c.interpreterName()}
	res, err := ci.exec(ctx, sb, req, sandbox.Stream{Stdout: execOutput{stream, &stream.out}, Stderr: execOutput{stream, &stream.errOut}})
	stopTicks()
	ci.after(c, res, err, count)
	if err != nil && !stream.hasStarted() {
		ci.refuse(w, err)
		return
	}
	lines := execResultLines(c.language, res)
	if err != nil {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the client left: nobody reads the rest
		}
		lines = append(lines, execError("WardenError", oneLine(interpRefusalOf(err).msg), ""))
	}
	stream.finish(lines...)
}

// after records in c what an execution did: one more in its count if it
// ran, and a fresh interpreter (at home, counting from 1) if it died.
func (ci *codeInterpreter) after(c *codeContext, res spec.Result, err error, count int) {
	ci.contexts.mu.Lock()
	defer ci.contexts.mu.Unlock()
	switch {
	case res.InterpreterRestarted:
		c.moved, c.count = false, 0
	case err == nil:
		c.count = count
	}
}

// prepare moves c's interpreter to c's directory if it is not there yet,
// and sets env in it.
func (ci *codeInterpreter) prepare(ctx context.Context, sb *Sandbox, c *codeContext, env map[string]string) error {
	code, err := codeFor(c.language)
	if err != nil {
		return err
	}
	ci.contexts.mu.Lock()
	chdir := c.needsChdir()
	ci.contexts.mu.Unlock()
	if chdir {
		if err := ci.quiet(ctx, sb, c, code.chdir(c.dir)); err != nil {
			return fmt.Errorf("moving the context to its cwd %s: %w", interpQuote(c.cwd, 256), err)
		}
		ci.contexts.mu.Lock()
		c.moved = true
		ci.contexts.mu.Unlock()
	}
	if len(env) == 0 {
		return nil
	}
	if err := ci.quiet(ctx, sb, c, code.setEnv(env)); err != nil {
		return fmt.Errorf("setting env_vars: %w", err)
	}
	return nil
}

// undoEnv resets env after the code ran, even when the client has gone.
// A failure only leaves the variables set, and is logged.
func (ci *codeInterpreter) undoEnv(ctx context.Context, sb *Sandbox, c *codeContext, env map[string]string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	code, err := codeFor(c.language)
	if err == nil {
		err = ci.quiet(ctx, sb, c, resetEnvCode(code, keys, sb.Env))
	}
	if err != nil {
		ci.log.Warn("e2b: undoing an execution's env_vars", "sandbox", sb.ID, "context", c.id, "err", err)
	}
}

// quiet runs the interpreter's own code in c, its output kept from the
// client. It fails with the Manager's error, or with spec.ErrInvalid
// saying why when the code failed (a cwd the sandbox cannot enter).
func (ci *codeInterpreter) quiet(ctx context.Context, sb *Sandbox, c *codeContext, code string) error {
	req := sandbox.ExecRequest{Language: c.language, Code: code, Interpreter: c.interpreterName()}
	res, err := ci.exec(ctx, sb, req, sandbox.Stream{})
	if err != nil {
		return err
	}
	if res.InterpreterRestarted {
		ci.after(c, res, nil, 0)
	}
	if e, ok := execResultError(c.language, res); ok {
		msg := e.Name + ": " + e.Value
		if c.language == "bash" {
			msg = "exit status " + e.Value + ": " + res.Stderr
		}
		return fmt.Errorf("%w: %s", spec.ErrInvalid, interpQuote(oneLine(msg), 512))
	}
	return nil
}

// exec runs one exec in sb's session, waiting (within maxBusyWait and
// ctx) while the session runs an exec started elsewhere: E2B's server
// queues executions where a Warden session refuses a second one.
func (ci *codeInterpreter) exec(ctx context.Context, sb *Sandbox, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
	deadline := time.Now().Add(maxBusyWait)
	backoff := 10 * time.Millisecond
	for {
		res, err := ci.sessions.Exec(ctx, sb.Owner, sb.ID, req, live)
		if !errors.Is(err, sandbox.ErrBusy) || time.Now().After(deadline) {
			return res, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return spec.Result{}, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// listContexts answers GET /contexts: the sandbox's contexts, oldest
// first, the default Python and JavaScript ones among them.
func (ci *codeInterpreter) listContexts(w http.ResponseWriter, r *http.Request) {
	sb, ok := ci.sandbox(w, r, "list contexts")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, ci.contexts.listing(sb))
}

// createContext answers POST /contexts: a new context with its own
// interpreter, in cwd (the home when none is given).
func (ci *codeInterpreter) createContext(w http.ResponseWriter, r *http.Request) {
	var body createContextJSON
	sb, ok := ci.sandboxBody(w, r, "create context", maxContextBody, &body)
	if !ok {
		return
	}
	c, err := newCodeContext(body)
	if err != nil {
		interpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := ci.contexts.add(sb, c); err != nil {
		interpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if c.needsChdir() && !ci.moveNew(w, r, sb, c) {
		return
	}
	writeJSON(w, http.StatusOK, contextJSON{ID: c.id, Language: c.language, Cwd: c.cwd})
}

// newCodeContext is the named context body asks for.
func newCodeContext(body createContextJSON) (*codeContext, error) {
	lang, err := contextLanguage(body.Language)
	if err != nil {
		return nil, err
	}
	cwd := body.Cwd
	if cwd == "" {
		cwd = e2bHome
	}
	dir, err := boxPath(cwd)
	if err != nil {
		return nil, fmt.Errorf("cwd %s: %w", interpQuote(cwd, 256), err)
	}
	return &codeContext{id: newContextID(), language: lang, cwd: cwd, dir: dir, named: true}, nil
}

// moveNew moves a new context's interpreter to its cwd at once, as E2B's
// server does, so a cwd the sandbox cannot enter fails the creation
// rather than the first execution; the failed context is removed.
func (ci *codeInterpreter) moveNew(w http.ResponseWriter, r *http.Request, sb *Sandbox, c *codeContext) bool {
	b := ci.contexts.box(sb)
	select {
	case b.turn <- struct{}{}:
	case <-r.Context().Done():
		ci.contexts.remove(sb, c)
		return false
	}
	err := ci.prepare(r.Context(), sb, c, nil)
	<-b.turn
	if err == nil {
		return true
	}
	ci.contexts.remove(sb, c)
	if ci.reset != nil {
		// A cleanup, which must not end with the client.
		if rerr := ci.reset.ResetInterpreter(context.WithoutCancel(r.Context()), sb.Owner, sb.ID, c.language, c.id); rerr != nil {
			ci.log.Warn("e2b: freeing the interpreter of a context that failed", "sandbox", sb.ID, "err", rerr)
		}
	}
	ci.refuse(w, err)
	return false
}

// restartContext answers POST /contexts/{id}/restart: the context's
// interpreter is killed, and the next execution starts a fresh one.
func (ci *codeInterpreter) restartContext(w http.ResponseWriter, r *http.Request) {
	_, c, ok := ci.killContext(w, r)
	if !ok {
		return
	}
	ci.contexts.reset(c)
	writeJSON(w, http.StatusOK, nil)
}

// removeContext answers DELETE /contexts/{id}: the context's interpreter
// is killed and the context unlisted. A default context removed comes
// back, fresh and with a new id, when code next names its language.
func (ci *codeInterpreter) removeContext(w http.ResponseWriter, r *http.Request) {
	sb, c, ok := ci.killContext(w, r)
	if !ok {
		return
	}
	ci.contexts.remove(sb, c)
	writeJSON(w, http.StatusOK, nil)
}

// killContext kills the interpreter of the context the path names, for a
// restart or a removal; false once it has answered why not.
func (ci *codeInterpreter) killContext(w http.ResponseWriter, r *http.Request) (*Sandbox, *codeContext, bool) {
	sb, c, ok := ci.pathContext(w, r)
	if !ok {
		return nil, nil, false
	}
	if err := ci.reset.ResetInterpreter(r.Context(), sb.Owner, sb.ID, c.language, c.interpreterName()); err != nil {
		ci.refuse(w, err)
		return nil, nil, false
	}
	return sb, c, true
}

// pathContext is the context a restart or removal names, or false once
// it has answered why there is none.
func (ci *codeInterpreter) pathContext(w http.ResponseWriter, r *http.Request) (*Sandbox, *codeContext, bool) {
	sb, ok := ci.sandbox(w, r, "context call")
	if !ok {
		return nil, nil, false
	}
	if ci.reset == nil {
		interpError(w, http.StatusNotImplemented, "restarting and removing contexts is not available on this server")
		return nil, nil, false
	}
	id := r.PathValue("id")
	c := ci.contexts.byID(sb, id)
	if c == nil {
		interpError(w, http.StatusNotFound, fmt.Sprintf("Context %s not found", interpQuote(id, 64)))
		return nil, nil, false
	}
	return sb, c, true
}

// interpRefusal is how an error the Manager gave answers: its status and its
// one-line message.
type interpRefusal struct {
	status int
	msg    string
}

// interpRefusalOf maps an error to E2B's answer: the Manager's by
// managerAnswers' data-plane status, and the interpreter's own.
func interpRefusalOf(err error) interpRefusal {
	if a, ok := answerOf(err); ok {
		return interpRefusal{a.data, a.advised(err)}
	}
	switch {
	case errors.Is(err, interp.ErrClosed):
		return interpRefusal{http.StatusConflict, "the context was restarted or removed as this code was about to run: run it again"}
	case errors.Is(err, context.DeadlineExceeded):
		return interpRefusal{http.StatusGatewayTimeout, err.Error()}
	}
	return interpRefusal{http.StatusInternalServerError, "internal error: see the server's log"}
}

// refuse answers err with its status; an internal one is logged, as its
// cause may name host paths the client must not see.
func (ci *codeInterpreter) refuse(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client left
	}
	ref := interpRefusalOf(err)
	if ref.status == http.StatusInternalServerError {
		ci.internal(w, err)
		return
	}
	logPublic(ci.log, err)
	interpError(w, ref.status, ref.msg)
}

// internal logs err and answers 500 without its detail.
func (ci *codeInterpreter) internal(w http.ResponseWriter, err error) {
	ci.log.Error("e2b: code interpreter", "err", err)
	interpError(w, http.StatusInternalServerError, "internal error: see the server's log")
}

// sandbox is the request's sandbox, or false once it has answered that
// there is none (what names the call): the routes put it there, so its
// absence is Warden's bug.
func (ci *codeInterpreter) sandbox(w http.ResponseWriter, r *http.Request, what string) (*Sandbox, bool) {
	sb := sandboxFrom(r.Context())
	if sb == nil {
		ci.internal(w, fmt.Errorf("%s: no sandbox in the request's context", what))
		return nil, false
	}
	return sb, true
}

// sandboxBody is sandbox, with the request's body, at most limit bytes,
// decoded into v; false once it has answered why not.
func (ci *codeInterpreter) sandboxBody(w http.ResponseWriter, r *http.Request, what string, limit int64, v any) (*Sandbox, bool) {
	sb, ok := ci.sandbox(w, r, what)
	if !ok || !ci.decodeBody(w, r, sb.Owner, limit, v) {
		return nil, false
	}
	return sb, true
}

// decodeBody decodes a JSON body of at most limit bytes into v, or
// answers why it cannot. The body is read with Config.ReadBody when set,
// charged to owner's share of the server's body memory as Warden's own
// bodies are. An empty body is an empty object.
func (ci *codeInterpreter) decodeBody(w http.ResponseWriter, r *http.Request, owner string, limit int64, v any) bool {
	data, release, err := ci.read(w, r, owner, limit)
	defer release()
	if err != nil {
		status := http.StatusBadRequest
		var st interface{ HTTPStatus() int }
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &st):
			status = st.HTTPStatus()
		case errors.As(err, &mbe):
			status, err = http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than %d bytes: send less", limit)
		}
		interpError(w, status, err.Error())
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		interpError(w, http.StatusBadRequest, "request body is not the JSON object expected: "+oneLine(err.Error()))
		return false
	}
	return true
}

// read reads a request body of at most limit bytes, with Config.ReadBody
// when set, and answers it with the func that gives its charge back.
func (ci *codeInterpreter) read(w http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
	if ci.readBody != nil {
		data, release, err := ci.readBody(w, r, owner, limit)
		if release == nil {
			release = func() {}
		}
		return data, release, err
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	return data, func() {}, err
}

// interpError answers with status and msg as one line of plain text, as
// E2B's code interpreter server answers its errors.
func interpError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, oneLine(msg)+"\n") // the client is gone if this fails
}

// interpQuote quotes s for a message, cut to at most n bytes.
func interpQuote(s string, n int) string {
	if len(s) > n {
		return strconv.Quote(s[:n]) + "..."
	}
	return strconv.Quote(s)
}
