package e2b

import "net/http"

// filesystemRoutes serves the filesystem.Filesystem Connect service on mux (placeholder: the fs helper fills it in).
func (s *Server) filesystemRoutes(mux *http.ServeMux) {}
