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

// GetMetrics serves the server's registry in the Prometheus text format.
func (a api) GetMetrics(w http.ResponseWriter, r *http.Request) {
	a.s.registry.ServeHTTP(w, r)
}

// GetOpenAPISpec serves api/openapi.yaml byte for byte, so clients and
// agents can discover the API from the server.
func (a api) GetOpenAPISpec(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/yaml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(apispec.OpenAPIYAML)
}
