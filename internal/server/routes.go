package server

import (
	"errors"
	"net/http"

	"github.com/warden-sandbox/warden/internal/server/apigen"
)

// api implements the generated apigen.ServerInterface. It is a type of
// its own so the handler methods do not become Server's public API.
type api struct {
	s *Server
}

var _ apigen.ServerInterface = api{}

// routes registers the spec's operations, through the generated wrapper
// that binds path and query parameters, then Config.Mount's handlers,
// plus a JSON 404 for everything else (the mux's own 404 and 405 are
// plain text).
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	apigen.HandlerWithOptions(api{s}, apigen.StdHTTPServerOptions{
		BaseRouter:       mux,
		ErrorHandlerFunc: s.paramError,
	})
	for pattern, h := range s.cfg.Mount {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, notFound("no route for %s %s; see /openapi.yaml", r.Method, r.URL.Path))
	})
	return mux
}

// paramError answers a parameter the generated wrapper could not bind.
// Validation has checked the same parameters first, so this is a second
// line of defence; it still answers in the API's error shape.
func (s *Server) paramError(w http.ResponseWriter, _ *http.Request, err error) {
	var required *apigen.RequiredParamError
	var format *apigen.InvalidParamFormatError
	switch {
	case errors.As(err, &required):
		s.writeError(w, badRequest("parameter %s: is required", required.ParamName))
	case errors.As(err, &format):
		s.writeError(w, badRequest("parameter %s: %s", format.ParamName, oneLine(format.Err)))
	default:
		s.writeError(w, badRequest("%s", oneLine(err)))
	}
}
