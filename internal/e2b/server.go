package e2b

import (
	"errors"
	"log/slog"
	"net/http"
)

// Config of the E2B front end.
type Config struct {
	// Sessions is the session manager: every E2B sandbox is one of its
	// sessions.
	Sessions Sessions
	// Logger receives internal errors (default: slog.Default()).
	Logger *slog.Logger
	// Authenticate turns an X-API-Key into its tenant with Warden's own
	// key store, so an E2B API key is a Warden API key; it fails for an
	// unknown key.
	Authenticate func(r *http.Request, key string) (owner string, err error)
}

// Server serves E2B's control plane and data plane over Sessions.
type Server struct {
	cfg       Config
	log       *slog.Logger
	sandboxes *registry
	control   http.Handler
	envd      http.Handler
	interp    http.Handler
}

// defaultMaxSandboxes bounds the registry; the Manager's own session limit
// is far lower, so the bound only matters if entries were never dropped.
const defaultMaxSandboxes = 1 << 16

// New builds the E2B front end; Sessions and Authenticate are required.
func New(cfg Config) (*Server, error) {
	if cfg.Sessions == nil || cfg.Authenticate == nil {
		return nil, errors.New("e2b: Config needs Sessions and Authenticate")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sandboxes: newRegistry(defaultMaxSandboxes)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.control = http.NotFoundHandler()
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
// a sandbox is up.
func (s *Server) healthRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
}
