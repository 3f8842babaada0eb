package e2b

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Header names of E2B's data plane, as the SDK sends them.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerAccessToken = "X-Access-Token"
	// headerTrafficToken carries the trafficAccessToken: the code
	// interpreter's context calls (@e2b/code-interpreter 2.8.0's
	// createCodeContext, listCodeContexts, restartCodeContext,
	// removeCodeContext) send only it, runCode sends both.
	headerTrafficToken = "E2b-Traffic-Access-Token"
)

// maxDataBody is the size a data-plane body's time to arrive is reckoned
// from when it declares no length (see server.PaceBody); the handlers
// bound the bodies themselves.
const maxDataBody = 256 << 20

// Ports of the services inside an E2B sandbox, as E2b-Sandbox-Port names
// them.
const (
	envdPort        = "49983"
	interpreterPort = "49999"
)

// Handler serves E2B's requests and passes every other request to next.
// A request with an E2b-Sandbox-Id header is a data-plane call, checked
// against its sandbox's token before anything else sees it; a request to
// one of the control plane's paths is a control-plane call, which carries
// an X-API-Key instead of Warden's bearer key. Warden's own paths (/v1/,
// /healthz, /metrics, ...) are not E2B's, so both APIs share a listener.
func (s *Server) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header[headerSandboxID]; ok {
			s.dataPlane(w, r)
			return
		}
		if _, pattern := s.control.Handler(r); pattern != "" {
			s.control.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized is the one answer to a data-plane call whose sandbox is
// unknown, gone or another's, or whose token is wrong: it does not say
// which, so nobody learns which ids exist.
const unauthorized = "unauthorized: no sandbox with this E2b-Sandbox-Id accepts this access token; send the envdAccessToken returned when the sandbox was created as X-Access-Token"

// dataPlane checks a data-plane call's sandbox and token and dispatches it
// by port.
func (s *Server) dataPlane(w http.ResponseWriter, r *http.Request) {
	sb, ended, ok := s.checkToken(r)
	switch {
	case !ok:
		writeDataError(w, r, http.StatusUnauthorized, "unauthenticated", unauthorized)
		return
	case ended || !s.sandboxes.live(sb):
		// The caller holds the token, so it may learn the sandbox ended;
		// E2B's proxy answers 502 then, which the SDK reports as a
		// sandbox that is not running or timed out.
		writeDataError(w, r, http.StatusBadGateway, "unavailable", "sandbox "+sb.ID+" is not running: it was killed or timed out; create a new one")
		return
	}
	port := r.Header.Get(headerSandboxPort)
	s.admit(r, sb.Owner, "e2b "+portOf(port)+" "+r.Method+" "+routeOf(r.URL.Path))
	if s.cfg.PaceBody != nil {
		s.cfg.PaceBody(w, r, maxDataBody)
	}
	r = r.WithContext(withSandbox(r.Context(), sb))
	switch port {
	case envdPort:
		s.envd.ServeHTTP(w, r)
	case interpreterPort:
		s.interp.ServeHTTP(w, r)
	default:
		writeDataError(w, r, http.StatusBadGateway, "unimplemented",
			fmt.Sprintf("E2b-Sandbox-Port %q is not served: Warden serves 49983 (envd) and 49999 (code interpreter); forwarding other ports is not built yet", port))
	}
}

// checkToken finds the sandbox a data-plane call names, live or recently
// ended, and checks its token in constant time, against a stand-in token
// when the id is unknown, so an unknown id and a wrong token cost the
// same and get the same answer. The token is the X-Access-Token (the
// envdAccessToken); on the code interpreter's port a call that carries an
// E2B-Traffic-Access-Token is checked by that instead, since some of the
// SDK's calls there carry only it. There must be at most one of each
// header (E2b-Sandbox-Port too) and exactly one E2b-Sandbox-Id: two of any would let a proxy in
// front and this server read different ones.
func (s *Server) checkToken(r *http.Request) (sb *Sandbox, ended, ok bool) {
	ids := r.Header.Values(headerSandboxID)
	envd, oneEnvd := single(r.Header, headerAccessToken)
	traffic, oneTraffic := single(r.Header, headerTrafficToken)
	port, onePort := single(r.Header, headerSandboxPort)
	if len(ids) != 1 || !oneEnvd || !oneTraffic || !onePort {
		return nil, false, false
	}
	sb, tokens, ended := s.sandboxes.peekAny(ids[0])
	if sb == nil {
		tokens = digestsOf(&Sandbox{EnvdToken: s.standIn, TrafficToken: s.standIn})
	}
	want, got := tokens.envd, sha256.Sum256([]byte(envd))
	if traffic != "" && port == interpreterPort {
		want, got = tokens.traffic, sha256.Sum256([]byte(traffic))
	}
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || sb == nil {
		return nil, false, false
	}
	return sb, ended, true
}

// single is the one value of header k ("" when absent), and false when
// there are more.
func single(h http.Header, k string) (string, bool) {
	v := h.Values(k)
	if len(v) > 1 {
		return "", false
	}
	if len(v) == 0 {
		return "", true
	}
	return v[0], true
}

// portOf names an E2b-Sandbox-Port for the log: one Warden serves, or
// "(other)", so a client cannot write what it likes into the log.
func portOf(port string) string {
	if port == envdPort || port == interpreterPort {
		return port
	}
	return "(other)"
}

// routeOf names a data-plane path for the log: a Connect method
// ("/process.Process/Start") or an envd route, never a query or file name.
func routeOf(path string) string {
	if isConnect(path) || path == "/files" || path == "/health" || path == "/execute" {
		return path
	}
	if strings.HasPrefix(path, "/contexts") {
		return "/contexts"
	}
	return "(other)"
}

// isConnect says whether path is a Connect call to one of envd's
// services, whose clients read errors in Connect's JSON shape.
func isConnect(path string) bool {
	return strings.HasPrefix(path, "/process.Process/") || strings.HasPrefix(path, "/filesystem.Filesystem/")
}

// writeDataError answers a data-plane call the router refuses: in
// Connect's error shape ({"code": "unauthenticated", "message": ...}) for
// a Connect call, in E2B's REST shape for the rest.
func writeDataError(w http.ResponseWriter, r *http.Request, status int, connectCode, message string) {
	if !isConnect(r.URL.Path) {
		writeError(w, status, "%s", message)
		return
	}
	writeConnectError(w, status, connectCode, message)
}

// writeConnectError answers with an error in Connect's shape, for a call
// refused before it reaches a Connect handler.
func writeConnectError(w http.ResponseWriter, status int, connectCode, message string) {
	body, err := json.Marshal(map[string]string{"code": connectCode, "message": message})
	if err != nil { // cannot happen for two strings
		body = []byte(`{"code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client is gone if this fails
}
