package e2b

import "net/http"

// fileRoutes serves envd's GET and POST /files on mux (placeholder: the fs helper fills it in).
func (s *Server) fileRoutes(mux *http.ServeMux) {}
