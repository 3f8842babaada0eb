package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Config of the E2B front end.
type Config struct {
	// Sessions is the session manager: every E2B sandbox is one of its
	// sessions.
	Sessions sandbox.Sessions
	// Logger receives internal errors (default: slog.Default()).
	Logger *slog.Logger
	// Authenticate turns an X-API-Key into its tenant with Warden's own
	// key store, so an E2B API key is a Warden API key; it fails for an
	// unknown key.
	Authenticate func(r *http.Request, key string) (owner string, err error)
	// Admit, when set, tells the HTTP server a request acts for owner at
	// route, once the control plane has authenticated it or the router
	// has checked its sandbox's token, for its log line and connection
	// protection (server.Admit).
	Admit func(r *http.Request, owner, route string)
	// Lifetimes sets a sandbox's timeout after its creation (setTimeout,
	// connect) and says the Manager's ceilings; without it those calls
	// answer 501 and sandboxes get the Manager's default idle timeout.
	Lifetimes Lifetimes
	// Limits are every sandbox's limits: the Manager's defaults, since
	// E2B's templates do not name limits (default: spec.DefaultLimits).
	Limits spec.Limits
	// Templates, when set, is the operator's template store: a create's
	// templateID names one of its templates (E2B's default ids name the
	// host's root). It must be the Manager's own Config.Templates.
	Templates sandbox.Templates
	// ReadBody, when set, reads a control-plane request body of at most
	// limit bytes for owner, charged to the HTTP server's budget of body
	// memory (server.HoldBody), and answers it with a func that gives the
	// charge back; an error may say its status with HTTPStatus() int.
	// Without it a body is read within limit only.
	ReadBody func(w http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error)
	// PaceBody, when set, paces a checked data-plane call's body as the
	// HTTP server paces its own uploads (server.PaceBody): it may go on
	// while bytes flow, but never stall nor trickle, whatever deadline
	// its handler sets.
	PaceBody func(w http.ResponseWriter, r *http.Request, limit int64)
	// StartTransfer, when set, counts an upload or download of session id
	// among the session's own file API transfers (server.StartTransfer),
	// so both APIs together hold no more than the descriptors reserved
	// for a session's transfers; it answers the func that counts it out,
	// or an error when the session has its fill.
	StartTransfer func(id string) (done func(), err error)
	// Owners is how many API keys may use the server (0 for one): each
	// gets its share of host-wide bounds such as directory watchers.
	Owners int
	// MaxSandboxes bounds the registry (default 65536); the Manager's own
	// session limits are far lower, so it only matters if entries of gone
	// sessions were never dropped.
	MaxSandboxes int
}

// Lifetimes is what the control plane needs of *sandbox.Manager beyond
// Sessions: moving a session's expiry, and the ceilings of a session's
// life (--max-ttl) and idle timeout (--max-idle-timeout).
type Lifetimes interface {
	SetExpiry(ctx context.Context, owner, id string, ttl time.Duration) (sandbox.Info, error)
	LifeCaps() (ttl, idle time.Duration)
}

// Server serves E2B's control plane and data plane over Sessions.
type Server struct {
	cfg       Config
	log       *slog.Logger
	sandboxes *registry
	// watchers are the filesystem service's, which a kill ends at once.
	watchers *watchers
	control  *http.ServeMux
	envd     http.Handler
	interp   http.Handler
	// standIn is what the router compares a token with when the sandbox
	// id is unknown: random, and no sandbox's.
	standIn string
}

// defaultMaxSandboxes is Config.MaxSandboxes's default.
const defaultMaxSandboxes = 1 << 16

// New builds the E2B front end; Sessions and Authenticate are required.
func New(cfg Config) (*Server, error) {
	if cfg.Sessions == nil || cfg.Authenticate == nil {
		return nil, errors.New("e2b: Config needs Sessions and Authenticate")
	}
	if cfg.Limits == (spec.Limits{}) {
		cfg.Limits = spec.DefaultLimits
	}
	if cfg.MaxSandboxes <= 0 {
		cfg.MaxSandboxes = defaultMaxSandboxes
	}
	standIn, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("e2b: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sandboxes: newRegistry(cfg.Sessions, cfg.MaxSandboxes), watchers: newWatchers(cfg.Owners), standIn: standIn}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.control = http.NewServeMux()
	s.controlRoutes(s.control)
	envd := http.NewServeMux()
	s.healthRoutes(envd)
	s.processRoutes(envd)
	s.filesystemRoutes(envd)
	s.fileRoutes(envd)
	s.envd = envd
	interp := http.NewServeMux()
	s.interpreterRoutes(interp)
	s.interp = interp
	return s, nil
}

// healthRoutes serves envd's GET /health, which the SDK polls to see that
// a sandbox is up: a paused one answers 502, as E2B's proxy does, which
// the SDK's isRunning() reads as false. The check does not resume it.
func (s *Server) healthRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if sb := sandboxFrom(r.Context()); sb != nil {
			if info, err := s.cfg.Sessions.Get(r.Context(), sb.Owner, sb.ID); err == nil && asleep(info) {
				writeDataError(w, r, http.StatusBadGateway, "unavailable", "sandbox "+sb.ID+" is paused: connect to it to resume it")
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// admit reports r's owner and route to the HTTP server, if it asked.
func (s *Server) admit(r *http.Request, owner, route string) {
	if s.cfg.Admit != nil {
		s.cfg.Admit(r, owner, route)
	}
}
