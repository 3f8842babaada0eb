package e2b

import "net/http"

// processRoutes serves the process.Process Connect service on mux (placeholder: the process helper fills it in).
func (s *Server) processRoutes(mux *http.ServeMux) {}
