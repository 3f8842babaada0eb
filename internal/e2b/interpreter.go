package e2b

import "net/http"

// interpreterRoutes serves the code interpreter's /execute and /contexts on mux (placeholder: the interp helper fills it in).
func (s *Server) interpreterRoutes(mux *http.ServeMux) {}
