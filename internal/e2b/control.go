package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// headerAPIKey carries the API key of every control-plane call.
const headerAPIKey = "X-Api-Key"

// maxControlBody bounds a control-plane request body: metadata and
// envVars fit in far less.
const maxControlBody = 1 << 20

// notBuilt are the prefixes of E2B's control-plane paths Warden does not
// serve yet (templates, snapshots, volumes, secrets, teams, metrics,
// logs, fork, network updates): they get a clear 501 instead of Warden's
// own 404, once the caller is authenticated.
var notBuilt = []string{
	"/sandboxes/", "/v2/sandboxes/", "/templates", "/templates/",
	"/v2/templates/", "/v3/templates", "/snapshots", "/volumes", "/volumes/", "/volumecontent/",
	"/secrets", "/secrets/", "/teams", "/teams/",
}

// controlRoutes serves E2B's REST control plane on mux.
func (s *Server) controlRoutes(mux *http.ServeMux) {
	routes := map[string]func(http.ResponseWriter, *http.Request, string){
		"POST /sandboxes":                        s.createSandbox,
		"POST /v2/sandboxes":                     s.createSandbox,
		"GET /sandboxes":                         s.listSandboxesV1,
		"GET /v2/sandboxes":                      s.listSandboxes,
		"GET /sandboxes/{sandboxID}":             s.getSandbox,
		"DELETE /sandboxes/{sandboxID}":          s.killSandbox,
		"POST /sandboxes/{sandboxID}/timeout":    s.setTimeout,
		"POST /sandboxes/{sandboxID}/connect":    s.connectSandbox,
		"POST /v2/sandboxes/{sandboxID}/connect": s.connectSandbox,
		"POST /sandboxes/{sandboxID}/pause":      s.pauseSandbox,
		"POST /sandboxes/{sandboxID}/resume":     s.resumeSandbox,
		"/sandboxes":                             s.notBuilt,
		"/v2/sandboxes":                          s.notBuilt,
	}
	for _, p := range notBuilt {
		routes[p] = s.notBuilt
	}
	for pattern, h := range routes {
		mux.Handle(pattern, s.authenticated(pattern, h))
	}
}

// authenticated checks the X-API-Key of a control-plane call before h
// sees it, and gives h the key's tenant.
func (s *Server) authenticated(route string, h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(headerAPIKey)
		if key == "" {
			writeError(w, http.StatusUnauthorized, "missing X-API-Key header: set E2B_API_KEY to one of this Warden server's API keys")
			return
		}
		owner, err := s.cfg.Authenticate(r, key)
		if err != nil {
			writeError(w, http.StatusUnauthorized, "%v: E2B_API_KEY must be one of this Warden server's API keys (WARDEN_API_KEYS)", err)
			return
		}
		s.admit(r, owner, "e2b "+route)
		h(w, r, owner)
	})
}

// notBuilt answers an E2B route Warden does not serve yet.
func (s *Server) notBuilt(w http.ResponseWriter, r *http.Request, _ string) {
	writeError(w, http.StatusNotImplemented, "%s %q is not supported by Warden yet: see \"Use the E2B SDKs\" in Warden's README for what is", r.Method, r.URL.Path)
}

// getSandbox answers GET /sandboxes/{sandboxID}: SandboxDetail.
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	sb, info, err := s.running(r.Context(), owner, r.PathValue("sandboxID"))
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toDetailJSON(sb, info))
}

// killSandbox answers DELETE /sandboxes/{sandboxID}: the session ends and
// the sandbox is forgotten.
func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	sb, _, err := s.sandboxes.lookup(r.Context(), owner, r.PathValue("sandboxID"))
	if err == nil {
		err = s.cfg.Sessions.Delete(r.Context(), owner, sb.ID)
	}
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.writeControlError(w, err)
		return
	}
	if sb != nil {
		s.sandboxes.forget(sb)
		s.watchers.sandboxKilled(sb.ID)
	}
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout answers POST /sandboxes/{sandboxID}/timeout: the sandbox
// now expires timeout seconds from the call, sooner or later than before.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, owner string) {
	var body timeoutJSON
	if err := s.decodeBody(w, r, owner, &body, true); err != nil {
		s.writeControlError(w, err)
		return
	}
	if body.Timeout == nil {
		writeError(w, http.StatusBadRequest, "timeout: is required: give the seconds from now after which the sandbox ends")
		return
	}
	ttl, err := timeoutSeconds(*body.Timeout)
	if err == nil {
		_, _, err = s.running(r.Context(), owner, r.PathValue("sandboxID"))
	}
	if err == nil {
		err = s.extend(r.Context(), owner, r.PathValue("sandboxID"), ttl)
	}
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connectSandbox answers POST /sandboxes/{sandboxID}/connect and its v2:
// the sandbox with its tokens, for its owner only. A timeout only ever
// extends the sandbox's life, as E2B's does, up to the server's ceiling.
func (s *Server) connectSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	var body timeoutJSON
	if err := s.decodeBody(w, r, owner, &body, false); err != nil {
		s.writeControlError(w, err)
		return
	}
	ttl := defaultTimeout
	var err error
	if body.Timeout != nil {
		ttl, err = timeoutSeconds(*body.Timeout)
	}
	var sb *Sandbox
	var info sandbox.Info
	if err == nil {
		sb, info, err = s.running(r.Context(), owner, r.PathValue("sandboxID"))
	}
	if err == nil && asleep(info) {
		// Connecting resumes a paused (or snapshotted) sandbox, as on E2B.
		info, err = s.cfg.Sessions.Resume(r.Context(), owner, sb.ID)
	}
	if err == nil {
		err = s.extendOnly(r.Context(), owner, info, ttl)
	}
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSandboxJSON(sb))
}

// pauseSandbox answers POST /sandboxes/{sandboxID}/pause: the session's
// processes stop, memory kept (sandbox.Manager.Pause), 204; with
// keepMemory false (`"memory": false`) the session is snapshotted instead,
// files only (sandbox.Manager.Snapshot). One already paused or
// snapshotted answers 409, which E2B's SDK takes for "already paused";
// one paused only for a snapshot's or a fork's copy (Info.CopyPaused) is
// not paused by its user, and is paused, so it stays paused once the
// copy ends.
func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	var body timeoutJSON
	if err := s.decodeBody(w, r, owner, &body, false); err != nil {
		s.writeControlError(w, err)
		return
	}
	sb, info, err := s.running(r.Context(), owner, r.PathValue("sandboxID"))
	if err == nil && asleep(info) && !info.CopyPaused {
		writeError(w, http.StatusConflict, "sandbox %q is already paused", sb.ID)
		return
	}
	if err == nil {
		if body.Memory != nil && !*body.Memory {
			// Files only, whatever the backend: the client asked for its
			// memory not to be kept.
			_, err = s.cfg.Sessions.Snapshot(r.Context(), owner, sb.ID, sandbox.SnapshotOptions{Memory: false})
		} else {
			_, err = s.cfg.Sessions.Pause(r.Context(), owner, sb.ID)
		}
	}
	if errors.Is(err, sandbox.ErrBusy) {
		// Not the 409 of a busy session elsewhere: the SDK reads a 409
		// here as "already paused".
		err = &controlError{http.StatusServiceUnavailable, tenantLine(err)}
	}
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resumeSandbox answers the deprecated POST /sandboxes/{sandboxID}/resume
// (the SDKs now connect): the paused sandbox runs again, 201 Sandbox; one
// that is running answers 409, as E2B's does.
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	var body timeoutJSON
	if err := s.decodeBody(w, r, owner, &body, false); err != nil {
		s.writeControlError(w, err)
		return
	}
	sb, info, err := s.running(r.Context(), owner, r.PathValue("sandboxID"))
	if err == nil && !asleep(info) {
		writeError(w, http.StatusConflict, "sandbox %q is already running", sb.ID)
		return
	}
	if err == nil {
		_, err = s.cfg.Sessions.Resume(r.Context(), owner, sb.ID)
	}
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSandboxJSON(sb))
}

// running is owner's sandbox id if its session can still run code (its
// lookup bounded by ctx, the request's). A dead
// session (its box died; Warden keeps its files for its own API) is no
// running E2B sandbox and answers ErrNotFound, with the reason.
func (s *Server) running(ctx context.Context, owner, id string) (*Sandbox, sandbox.Info, error) {
	sb, info, err := s.sandboxes.lookup(ctx, owner, id)
	if err != nil {
		return nil, info, err
	}
	if !alive(info) {
		return nil, info, fmt.Errorf("%w: sandbox %q has ended (%s): kill it and create a new one", sandbox.ErrNotFound, id, ended(info))
	}
	return sb, info, nil
}

// alive says whether a session can run code: an E2B sandbox "running",
// or "paused" (paused or snapshotted), which the Manager resumes for the
// code it is asked to run.
func alive(info sandbox.Info) bool {
	switch info.State {
	case sandbox.StateCreating, sandbox.StateReady, sandbox.StateBusy, sandbox.StatePaused, sandbox.StateSnapshotted:
		return true
	}
	return false
}

// asleep says a session is what E2B calls paused: paused, or snapshotted
// (E2B's pause without keepMemory).
func asleep(info sandbox.Info) bool {
	return info.State == sandbox.StatePaused || info.State == sandbox.StateSnapshotted
}

// ended says why a session that is not alive ended.
func ended(info sandbox.Info) string {
	if info.Reason != "" {
		return info.Reason
	}
	return string(info.State)
}

// decodeBody reads owner's control-plane JSON body into v, within
// maxControlBody and the server's budget of body memory (readBody).
// Unknown fields are ignored, as E2B's API does, so a newer SDK that
// sends a field more still works; the fields Warden cannot honour are
// decoded and refused by name. An empty body is an error only when
// required.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, owner string, v any, required bool) error {
	buf, release, err := s.readBody(w, r, owner)
	defer release()
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	err = dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF) && !required:
		return nil
	case errors.Is(err, io.EOF):
		return badRequest("request body is required: send a JSON object")
	case errors.As(err, &te):
		return badRequest("%s: must be %s, not %s", te.Field, te.Type, te.Value)
	case err != nil:
		return badRequest("request body is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("request body has more data after its JSON value")
	}
	return nil
}

// readBody reads a control-plane body with Config.ReadBody, or within
// maxControlBody alone; its errors are controlErrors.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, owner string) ([]byte, func(), error) {
	if s.cfg.ReadBody != nil {
		buf, release, err := s.cfg.ReadBody(w, r, owner, maxControlBody)
		var st interface{ HTTPStatus() int }
		if errors.As(err, &st) {
			err = &controlError{st.HTTPStatus(), err.Error()}
		}
		return buf, release, err
	}
	buf, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		err = &controlError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes: send less metadata or fewer envVars", mbe.Limit)}
	case err != nil:
		err = badRequest("reading the request body: %v", err)
	}
	return buf, func() {}, err
}

// Timeouts of a sandbox's life, in E2B's whole seconds.
const (
	// defaultTimeout is E2B's own default (NewSandboxV2, ConnectSandboxV2).
	defaultTimeout = 300 * time.Second
	// maxTimeoutSeconds keeps seconds from overflowing a Duration; the
	// Manager's ceiling is far lower.
	maxTimeoutSeconds = 1 << 31
)

// timeoutSeconds checks a timeout in seconds.
func timeoutSeconds(n int64) (time.Duration, error) {
	if n < 1 || n > maxTimeoutSeconds {
		return 0, badRequest("timeout: %d seconds is out of range: give at least 1", n)
	}
	return time.Duration(n) * time.Second, nil
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer failed: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // the client is gone if this fails
}
