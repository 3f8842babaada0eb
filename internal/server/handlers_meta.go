package server

import (
	"net/http"

	apispec "github.com/warden-sandbox/warden/api"
)

// Healthz answers while the process serves HTTP; it checks nothing else,
// so an orchestrator restarts Warden only when it is truly stuck.
func (a api) Healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// GetMetrics serves, in the Prometheus text format, the whole server's
// registry to an operator (a metrics key, or anyone on a server without
// keys) and a tenant's own series to its key, so no tenant learns what
// others do or how loaded the server is.
func (a api) GetMetrics(w http.ResponseWriter, r *http.Request) {
	o := owner(r)
	if a.s.cfg.AllowAnonymous || o == operatorOwner {
		a.s.registry.ServeHTTP(w, r)
		return
	}
	// Every key's owner has its series, built in New from the keys.
	a.s.metrics.tenants[o].reg.ServeHTTP(w, r)
}

// GetOpenAPISpec serves api/openapi.yaml byte for byte, so clients and
// agents can discover the API from the server.
func (a api) GetOpenAPISpec(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/yaml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(apispec.OpenAPIYAML) // the client is gone if this fails
}
