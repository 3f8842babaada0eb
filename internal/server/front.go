package server

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/connlimit"
)

// ErrBadKey is what a KeyAuthenticator answers for a key that is not one
// of the server's API keys.
var ErrBadKey = errors.New("invalid API key")

// KeyAuthenticator checks an API key a Front received its own way (E2B's
// X-API-Key header) against the same keys Config gives the server, so a
// second API on the listener has the same tenants: it answers the key's
// owner, "" for any key on a server without keys, and an error for an
// unknown key or a metrics key, which reads /metrics only. Every key is
// compared, in constant time, as for the server's own requests.
func KeyAuthenticator(cfg Config) (func(r *http.Request, key string) (string, error), error) {
	keys, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	return func(_ *http.Request, key string) (string, error) {
		if cfg.AllowAnonymous {
			return "", nil
		}
		owner, found := matchKey(keys, key)
		switch {
		case !found:
			return "", ErrBadKey
		case owner == operatorOwner:
			return "", errors.New("a metrics key reads " + metricsPath + " only: use an API key")
		}
		return owner, nil
	}, nil
}

// Admit tells the server that a request a Front serves acts for owner, at
// route (a ServeMux pattern): the request's log line and refusal metrics
// then name them, and its connection is protected from eviction as an
// authenticated tenant's is. A Front calls it once it has authenticated
// the request its own way.
func Admit(r *http.Request, owner, route string) {
	if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
		info.owner, info.route = owner, route
	}
	connlimit.Authenticated(r.Context(), owner)
}

// HoldBody reads the body of a request a Front serves for owner as the
// API's own JSON bodies are read: within limit (and MaxBodyBytes),
// charged to owner's share of MaxInFlightBodyBytes as it arrives, and
// kept arriving (BodyReadTimeout), so a tenant holds no more request
// memory through a Front than through the API. It answers the body and a
// func that gives its charge back, to call once the body is decoded. An
// error is one line, and says its HTTP status through HTTPStatus.
func (s *Server) HoldBody(w http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
	c := &charge{budget: s.bodies, owner: owner}
	release := sync.OnceFunc(c.release)
	buf, err := s.readCharged(w, r, c, min(limit, s.cfg.MaxBodyBytes))
	if err != nil {
		release()
		return nil, func() {}, err
	}
	s.setReadDeadline(w, time.Time{})
	return buf, release, nil
}

// StartTransfer counts an upload or download a Front serves of session
// id among the session's own file API transfers, so that both together
// stay within MaxTransfersPerSession and the descriptors reserved for
// them (TransferDescriptors). It answers the func that counts it out, or
// an error naming the bound when the session has its fill.
func (s *Server) StartTransfer(id string) (func(), error) {
	return s.transfers.start(id)
}

// HTTPStatus is the status the error answers with, for a Front that
// writes its own error shape.
func (e *apiError) HTTPStatus() int { return e.status }

// PaceBody makes the body of a request a Front streams to its handler
// (an upload, a Connect call) keep arriving as the API's own bodies must:
// before each read its read deadline moves to BodyReadTimeout from then,
// never past BodyReadTimeout plus limit (or its declared length) at
// 64 KiB/s, so a long upload goes on while bytes flow and a trickle is
// cut off, whatever deadline the handler set.
func (s *Server) PaceBody(w http.ResponseWriter, r *http.Request, limit int64) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	r.Body = s.pace(w, r, limit)
}
