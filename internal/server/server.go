// Package server is the HTTP API of `warden serve`: the routes of
// api/openapi.yaml over a session manager, with API-key auth and tenancy,
// request validation against the embedded spec, NDJSON streaming of exec
// output, Prometheus metrics and panic recovery.
//
// A request passes, in order: logging and panic recovery, authentication
// (so an unauthenticated caller learns nothing else), the body size limit
// and OpenAPI validation, then the handler, which decodes strictly again
// and calls the Sessions.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	apispec "github.com/warden-sandbox/warden/api"
	"github.com/warden-sandbox/warden/internal/metrics"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes bounds a JSON request body: enough for 4 MiB of
	// code plus escaping, small enough that a flood of requests cannot
	// exhaust memory.
	DefaultMaxBodyBytes int64 = 8 << 20
	// DefaultMaxUploadBytes bounds one uploaded file, matching the
	// workspace's own default file limit.
	DefaultMaxUploadBytes int64 = 64 << 20
	// DefaultMaxInFlightBodyBytes bounds the JSON body bytes of all
	// requests being read and validated at once: eight full bodies.
	DefaultMaxInFlightBodyBytes int64 = 64 << 20
	// DefaultBodyReadTimeout is how long a request body may pause.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultStreamWriteTimeout is how long an answer (one event of an
	// exec stream, one chunk of a download) may take to reach a client that
	// stopped reading before it is given up (and a streamed exec killed).
	DefaultStreamWriteTimeout = 30 * time.Second
)

// Config says how the server authenticates, what it accepts and where it
// reports. The zero value of each optional field takes its default.
type Config struct {
	// Keys are the API keys accepted as "Authorization: Bearer <key>".
	// Each key is its own tenant: it sees only the sessions it created,
	// and on /metrics only its own figures.
	Keys []string
	// MetricsKeys are the operator's keys: they read /metrics only, and
	// there the whole server's figures (every tenant's sessions and execs,
	// connections, the process). Without keys the one anonymous owner is
	// the operator.
	MetricsKeys []string
	// AllowAnonymous serves every request without a key, as the single
	// owner "". It must not be combined with Keys; the caller should then
	// listen on loopback only.
	AllowAnonymous bool
	// MaxBodyBytes bounds JSON request bodies (default 8 MiB); a larger
	// body is answered 413.
	MaxBodyBytes int64
	// MaxUploadBytes bounds an uploaded file (default 64 MiB); a larger
	// upload is answered 413.
	MaxUploadBytes int64
	// MaxInFlightBodyBytes bounds the JSON body bytes held by all requests
	// at once (default 64 MiB, and never less than MaxBodyBytes), shared
	// fairly among the API keys: the requests of one key hold at most
	// max(MaxBodyBytes, MaxInFlightBodyBytes / number of keys). A body is
	// charged as it arrives, not by the length it declares: it holds the
	// buffer it is read into, which starts at 1 KiB and then takes the
	// rest of a declared length, or doubles as bytes of a chunked one
	// come, until its handler has decoded it. So while there are at most
	// MaxInFlightBodyBytes/MaxBodyBytes keys (8 by default) each key
	// always finds its whole share free, whatever the others declare or
	// send; with more keys one key still holds at most MaxBodyBytes. A
	// request that finds no room in its key's share within a few seconds
	// is answered 503.
	MaxInFlightBodyBytes int64
	// BodyReadTimeout bounds how long a request body may pause (default
	// 30s); a body of n bytes must also be whole within BodyReadTimeout +
	// n / 64 KiB/s. Else the request is answered 408 and its connection
	// closed. It holds for every request with a body, before
	// authentication too, so nobody can hold a connection open by
	// announcing a body and never sending it.
	BodyReadTimeout time.Duration
	// StreamWriteTimeout bounds each write of every answer (default
	// 30s): a JSON answer, each event of an exec or /mcp stream, each
	// chunk of a download. A client that reads none of it for that long loses its
	// connection (a stream's exec is killed), so a client that stops
	// reading, with a key or without, cannot keep a connection, a session
	// or an open file busy.
	StreamWriteTimeout time.Duration
	// Logger receives one line per request and every recovered panic
	// (default: slog.Default()). Keys and bodies are never logged.
	Logger *slog.Logger
	// Mount serves extra handlers at their ServeMux patterns (such as
	// "/mcp") behind the same logging, recovery and authentication, but
	// outside the spec: they are not validated against it. Their bodies
	// are read first as JSON bodies are, within MaxBodyBytes, the key's
	// share of MaxInFlightBodyBytes and BodyReadTimeout. OwnerFrom gives
	// them the request's tenant.
	Mount map[string]http.Handler
	// Registry receives the whole server's metrics and is what /metrics
	// serves to an operator (a metrics key, or anyone on a server without
	// keys); a tenant's key reads only its own series, kept apart
	// (default: a new registry of its own). A caller may register its own
	// series there to serve them alongside, to operators only; one registry
	// serves one server, since a second would register the same names
	// again.
	Registry *metrics.Registry
	// Front, when set, wraps the API with a second one on the same
	// listener (E2B's, see internal/e2b): it serves the requests that are
	// its own and passes the others to next, the API. It runs inside the
	// logging, panic recovery and body deadline, and before
	// authentication and validation, which are the API's: a Front
	// authenticates its requests itself (KeyAuthenticator, Admit) and
	// bounds their bodies.
	Front func(next http.Handler) http.Handler
	// Templates, when set, is the operator's template store that
	// GET /v1/templates lists after the host's root (the same store the
	// Manager resolves sessions' templates from). Tenants only read it.
	Templates sandbox.Templates
	// Replicas, when set, forwards the requests of the HTTP API's
	// session routes (/v1/sessions/{id}/...) for sessions another live
	// replica holds to it, after authentication and before validation
	// (the holder validates). A Front's and Mount's requests are not
	// forwarded.
	Replicas *Replicas
}

// Server is the HTTP API over a Sessions. It is safe for concurrent use;
// build it with New and serve Handler.
type Server struct {
	sessions sandbox.Sessions
	cfg      Config
	keys     []apiKey
	log      *slog.Logger
	metrics  *serverMetrics
	registry *metrics.Registry
	// mux routes the API's paths; its patterns are the spec's paths, which
	// is how validation finds each request's operation in operations.
	mux        *http.ServeMux
	operations map[string]*operation
	// shape bounds every JSON request body, as the largest any operation
	// allows; bodies is the budget of MaxInFlightBodyBytes, shared by
	// the keys' owners.
	shape  shape
	bodies *byteBudget
	// transfers bounds each session's uploads and downloads at once.
	transfers transfers
	handler   http.Handler
}

// CheckKeys checks c's keys as New does, so that a caller such as warden
// serve learns of bad keys before it starts anything, from the one place
// the rules are kept.
func (c Config) CheckKeys() error {
	_, err := c.keys()
	return err
}

// keys checks c's keys and parses them.
func (c Config) keys() ([]apiKey, error) {
	switch {
	case len(c.Keys) == 0 && !c.AllowAnonymous:
		return nil, errors.New("server: no API keys; set Keys, or AllowAnonymous to serve without auth on loopback")
	case len(c.Keys) > 0 && c.AllowAnonymous:
		return nil, errors.New("server: Keys and AllowAnonymous together; choose one")
	case len(c.MetricsKeys) > 0 && len(c.Keys) == 0:
		return nil, errors.New("server: MetricsKeys without Keys; a server without keys shows its metrics to anyone who can connect")
	}
	keys, err := parseKeys(c.Keys, c.MetricsKeys)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return keys, nil
}

// New builds a server over s. It refuses a configuration without keys
// unless AllowAnonymous says that is intended, so a forgotten flag never
// serves sandboxes to anyone who can connect.
func New(s sandbox.Sessions, cfg Config) (*Server, error) {
	if s == nil {
		return nil, errors.New("server: no Sessions")
	}
	keys, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	if r := cfg.Replicas; r != nil && (len(r.Key) < minReplicaKey || r.Holds == nil || r.Holder == nil) {
		return nil, fmt.Errorf("server: Replicas needs a key of at least %d bytes, Holds and Holder", minReplicaKey)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.MaxInFlightBodyBytes <= 0 {
		cfg.MaxInFlightBodyBytes = DefaultMaxInFlightBodyBytes
	}
	// A body must fit the budget on its own, or it would wait in vain.
	cfg.MaxInFlightBodyBytes = max(cfg.MaxInFlightBodyBytes, cfg.MaxBodyBytes)
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = metrics.NewRegistry()
	}
	m, err := newMetrics(cfg.Registry, s, owners(cfg.Keys))
	if err != nil {
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	// The spec is read here rather than at package init: every warden
	// process pays for init, and so does each sandbox's start when warden
	// runs itself as the init.
	ops, err := loadOperations(apispec.OpenAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("server: loading the API spec: %w", err)
	}
	sh, err := requestShape(ops)
	if err != nil {
		return nil, fmt.Errorf("server: bounding request bodies: %w", err)
	}
	srv := &Server{
		sessions:   s,
		cfg:        cfg,
		keys:       keys,
		log:        cfg.Logger,
		metrics:    m,
		registry:   cfg.Registry,
		operations: ops,
		shape:      sh,
		bodies: newByteBudget(cfg.MaxInFlightBodyBytes,
			fairShare(cfg.MaxInFlightBodyBytes, cfg.MaxBodyBytes, Tenants(cfg.Keys))),
	}
	srv.mux = srv.routes()
	inner := srv.withValidation(srv.mux)
	if cfg.Replicas != nil {
		inner = newForwarder(srv, *cfg.Replicas).wrap(inner)
	}
	api := srv.withAuth(inner)
	if cfg.Front != nil {
		api = cfg.Front(api)
	}
	srv.handler = srv.withLogAndRecover(srv.withBodyDeadline(api))
	return srv, nil
}

// Handler is the whole API, ready for an http.Server. The caller sets the
// server's timeouts; leave its WriteTimeout at zero, since it would bound
// whole requests, execs included: the handler bounds each answer's
// writing itself (StreamWriteTimeout).
func (s *Server) Handler() http.Handler { return s.handler }
