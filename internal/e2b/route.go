package e2b

import (
	"crypto/subtle"
	"net/http"
)

// Header names of E2B's data plane, as the SDK sends them.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerAccessToken = "X-Access-Token"
)

// Ports of the services inside an E2B sandbox, as E2b-Sandbox-Port names
// them.
const (
	envdPort        = "49983"
	interpreterPort = "49999"
)

// Handler serves E2B's requests and passes every other request to next.
// A request with an E2b-Sandbox-Id header is a data-plane call: the
// router checks its token before anything else sees it.
func (s *Server) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerSandboxID) != "" {
			s.dataPlane(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dataPlane checks a data-plane call's sandbox and token and dispatches it
// by port. A missing sandbox and a wrong token get the same answer.
func (s *Server) dataPlane(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxes.get(r.Header.Get(headerSandboxID))
	if sb == nil || !tokenOK(sb.EnvdToken, r.Header.Get(headerAccessToken)) {
		writeError(w, http.StatusUnauthorized, "unauthorized: the sandbox does not exist or the X-Access-Token is wrong; use the token returned when the sandbox was created")
		return
	}
	r = r.WithContext(withSandbox(r.Context(), sb))
	switch r.Header.Get(headerSandboxPort) {
	case envdPort:
		s.envd.ServeHTTP(w, r)
	case interpreterPort:
		s.interp.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusBadGateway, "port %q is not served: only 49983 (envd) and 49999 (code interpreter) are; port forwarding is not built yet", r.Header.Get(headerSandboxPort))
	}
}

// tokenOK compares a token in constant time; an empty want never matches.
func tokenOK(want, got string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
