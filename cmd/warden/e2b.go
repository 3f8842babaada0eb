//go:build !slim

package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/warden-sandbox/warden/internal/e2b"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
)

// e2bFront is E2B's API over mgr, to serve on the API's listener: its API
// keys are the server's (cfg's), so an E2B API key is a Warden API key,
// its sandboxes get the Manager's default limits and life ceilings, and
// its request bodies are charged to the server's budget and paced
// through api, which is set once the server is built (before it serves
// anything).
func e2bFront(mgr *sandbox.Manager, cfg server.Config, log *slog.Logger, api **server.Server) (func(http.Handler) http.Handler, error) {
	auth, err := server.KeyAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	front, err := e2b.New(e2b.Config{
		Sessions: mgr, Lifetimes: mgr, Limits: mgr.DefaultLimits(), Logger: log, Templates: cfg.Templates,
		Owners:       server.Tenants(cfg.Keys),
		Authenticate: auth, Admit: server.Admit,
		ReadBody: func(w http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
			return (*api).HoldBody(w, r, owner, limit)
		},
		PaceBody:      func(w http.ResponseWriter, r *http.Request, limit int64) { (*api).PaceBody(w, r, limit) },
		StartTransfer: func(id string) (func(), error) { return (*api).StartTransfer(id) },
	})
	if err != nil {
		return nil, fmt.Errorf("starting the E2B API: %w", err)
	}
	return front.Handler, nil
}

// descriptorsPerSandbox is the descriptors the server keeps free of
// connections for each session: the session's own, its file transfers'
// and what E2B's API (served on every listener) may hold for it.
const descriptorsPerSandbox = sandbox.DescriptorsPerSandbox + server.TransferDescriptors + e2b.DescriptorsPerSandbox

// descriptorsReserved is descriptorsPerSandbox for sessions of backend
// whose agent is reached by transport ("": the backend's default, which
// it resolves itself, so no caller can reserve for the wrong one): the
// stream transport's relays hold more.
func descriptorsReserved(backend string, transport native.AgentTransport) int {
	if sandbox.SessionTransport(backend, transport) == native.TransportStream {
		return descriptorsPerSandbox + sandbox.StreamDescriptors()
	}
	return descriptorsPerSandbox
}
