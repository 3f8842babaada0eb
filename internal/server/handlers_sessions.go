package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// decode reads the JSON body into v strictly: unknown fields and data
// after the value are 400, so a typo never falls back to a default. The
// validator has already checked the same body against the spec; this is
// the second line of defence for anything it let through.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decodeBody(w, r, v, true)
}

// decodeOptional is decode for an operation whose body may be left out:
// v then keeps its zero value.
func (s *Server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decodeBody(w, r, v, false)
}

func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, required bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		if end := dec.InputOffset(); !atEOF(dec) {
			return badRequest("request body has more data after its JSON value at byte %d", end)
		}
		return nil
	case errors.Is(err, io.EOF) && !required:
		return nil
	case errors.Is(err, io.EOF):
		return badRequest("request body: is required (send {} for the defaults)")
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.As(err, &te):
		return badRequest("%s: must be %s, not %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return badRequest("request body is not valid JSON: %s", jsonError(err, dec.InputOffset()))
}

// CreateSession builds a session for the caller with the server's default
// limits overridden by the fields given, and answers 201 with it.
func (a api) CreateSession(w http.ResponseWriter, r *http.Request) {
	var body sessionCreateJSON
	if err := a.s.decode(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return
	}
	o, err := body.options(a.s.sessions.DefaultLimits())
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	info, err := a.s.sessions.Create(r.Context(), owner(r), o)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSessionJSON(info))
}

// ListSessions answers the caller's live sessions, never another
// tenant's: on a backend shared by several servers, every server's.
func (a api) ListSessions(w http.ResponseWriter, r *http.Request) {
	infos, err := a.s.sessions.ListEverywhere(r.Context(), owner(r))
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionListJSON(infos))
}

// GetSession answers one of the caller's sessions.
func (a api) GetSession(w http.ResponseWriter, r *http.Request, id string) {
	info, err := a.s.sessions.Get(r.Context(), owner(r), id)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(info))
}

// DeleteSession ends one of the caller's sessions and answers 204.
func (a api) DeleteSession(w http.ResponseWriter, r *http.Request, id string) {
	if err := a.s.sessions.Delete(r.Context(), owner(r), id); err != nil {
		a.s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// PauseSession pauses one of the caller's sessions and answers it.
func (a api) PauseSession(w http.ResponseWriter, r *http.Request, id string) {
	a.step(w, r, id, a.s.sessions.Pause)
}

// ResumeSession resumes one of the caller's paused sessions and answers
// it.
func (a api) ResumeSession(w http.ResponseWriter, r *http.Request, id string) {
	a.step(w, r, id, a.s.sessions.Resume)
}

// SnapshotSession writes one of the caller's sessions to disk, closes
// its sandbox and answers it, snapshotted.
// Its memory is kept where the backend can, unless the body says
// "memory": false.
func (a api) SnapshotSession(w http.ResponseWriter, r *http.Request, id string) {
	var body snapshotRequestJSON
	if err := a.s.decodeOptional(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return
	}
	o := sandbox.SnapshotOptions{Memory: body.Memory == nil || *body.Memory}
	a.step(w, r, id, func(ctx context.Context, owner, id string) (sandbox.Info, error) {
		return a.s.sessions.Snapshot(ctx, owner, id, o)
	})
}

// step moves one of the caller's sessions to another state with move
// (Pause, Resume, Snapshot) and answers the session as move left it, so
// every state change answers, and fails, the same way.
func (a api) step(w http.ResponseWriter, r *http.Request, id string, move func(ctx context.Context, owner, id string) (sandbox.Info, error)) {
	info, err := move(r.Context(), owner(r), id)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(info))
}

// ForkSession makes new sessions from one of the caller's sessions (its
// files, and its memory unless the body says "memory": false) and
// answers 201 with them.
func (a api) ForkSession(w http.ResponseWriter, r *http.Request, id string) {
	var body forkJSON
	if err := a.s.decode(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return
	}
	o := sandbox.ForkOptions{Memory: body.Memory == nil || *body.Memory}
	infos, err := a.s.sessions.Fork(r.Context(), owner(r), id, body.Count, o)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSessionListJSON(infos))
}

// GetSessionNetwork answers a session's network policy and the egress
// proxy's decisions for it so far.
func (a api) GetSessionNetwork(w http.ResponseWriter, r *http.Request, id string) {
	info, err := a.s.sessions.Get(r.Context(), owner(r), id)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	events, err := a.s.sessions.NetworkEvents(r.Context(), owner(r), id)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	if events == nil {
		events = []spec.NetworkEvent{}
	}
	writeJSON(w, http.StatusOK, networkLogJSON{Network: toNetworkJSON(info.Network), Events: events})
}

// SetSessionNetwork replaces a live session's allow and deny rules.
func (a api) SetSessionNetwork(w http.ResponseWriter, r *http.Request, id string) {
	var body networkRulesJSON
	if err := a.s.decode(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return
	}
	info, err := a.s.sessions.SetNetwork(r.Context(), owner(r), id, body.Allow, body.Deny)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(info))
}
