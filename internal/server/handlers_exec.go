package server

import (
	"context"
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// ExecInSession runs one command or snippet in a session and answers its
// Result once it has finished.
func (a api) ExecInSession(w http.ResponseWriter, r *http.Request, id string) {
	req, ok := a.execRequest(w, r)
	if !ok {
		return
	}
	res, err := a.s.observe(owner(r), kind(req), func() (spec.Result, error) {
		return a.s.sessions.Exec(r.Context(), owner(r), id, req, sandbox.Stream{})
	})
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	a.s.writeResult(w, res)
}

// StreamExecInSession runs one command or snippet and streams its output
// as NDJSON events while it runs, ending with the Result. A client that
// disconnects cancels the request's context, and one that stops reading
// breaks the stream, which cancels the exec's; either way the Manager
// kills the exec.
func (a api) StreamExecInSession(w http.ResponseWriter, r *http.Request, id string) {
	req, ok := a.execRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream := newNDJSONStream(w, a.s.cfg.StreamWriteTimeout, cancel)
	res, err := a.s.observe(owner(r), kind(req), func() (spec.Result, error) {
		return a.s.sessions.Exec(ctx, owner(r), id, req, stream.live())
	})
	if !stream.finish(res, err) {
		a.s.writeError(w, err)
	}
}

func (a api) execRequest(w http.ResponseWriter, r *http.Request) (sandbox.ExecRequest, bool) {
	var body execJSON
	if err := a.s.decode(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return sandbox.ExecRequest{}, false
	}
	req, err := body.request()
	if err != nil {
		a.s.writeError(w, err)
		return sandbox.ExecRequest{}, false
	}
	return req, true
}

// RunOnce runs one command or snippet in a fresh sandbox, destroyed
// after, and answers its Result.
func (a api) RunOnce(w http.ResponseWriter, r *http.Request) {
	var body runJSON
	if err := a.s.decode(w, r, &body); err != nil {
		a.s.writeError(w, err)
		return
	}
	o, req, err := body.request(a.s.sessions.DefaultLimits())
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	res, err := a.s.observe(owner(r), "run", func() (spec.Result, error) {
		return a.s.sessions.Run(r.Context(), owner(r), o, req, sandbox.Stream{})
	})
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	a.s.writeResult(w, res)
}

// observe runs one exec and records it in the metrics. A refusal (the
// session is missing or busy) is no exec and is counted only as a denied
// request; a failure of Warden itself counts as an exec with outcome
// "error".
func (s *Server) observe(owner, kind string, exec func() (spec.Result, error)) (spec.Result, error) {
	start := time.Now()
	res, err := exec()
	if err == nil || toAPIError(err).status >= http.StatusInternalServerError {
		s.metrics.exec(owner, kind, res, err, time.Since(start))
	}
	return res, err
}
