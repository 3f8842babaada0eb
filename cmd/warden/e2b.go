package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/warden-sandbox/warden/internal/e2b"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
)

// e2bFront is E2B's API over mgr, to serve on the API's listener: its API
// keys are the server's (cfg's), so an E2B API key is a Warden API key,
// and its sandboxes get the Manager's default limits and life ceilings.
func e2bFront(mgr *sandbox.Manager, cfg server.Config, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	auth, err := server.KeyAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	front, err := e2b.New(e2b.Config{
		Sessions: mgr, Lifetimes: mgr, Limits: mgr.DefaultLimits(), Logger: log,
		Authenticate: auth, Admit: server.Admit,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the E2B API: %w", err)
	}
	return front.Handler, nil
}
