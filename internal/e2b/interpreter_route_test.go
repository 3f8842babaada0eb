package e2b

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestInterpreterTrafficToken: @e2b/code-interpreter's context calls carry
// only the trafficAccessToken (E2B-Traffic-Access-Token), so on the
// interpreter's port that token stands in for a missing X-Access-Token;
// it opens nothing else, and a wrong, doubled or another sandbox's one is
// refused as any bad token is.
func TestInterpreterTrafficToken(t *testing.T) {
	s, _, h := newControlServer(t, nil)
	s.envd, s.interp = reached(envdPort), reached(interpreterPort)
	mine := created(t, h, ctlKeyAlice, `{"templateID":"code-interpreter-v1"}`)
	theirs := created(t, h, ctlKeyBob, `{"templateID":"code-interpreter-v1"}`)
	tests := []struct {
		name, port, envd, traffic string
		double                    bool
		status                    int
	}{
		{"traffic token on the interpreter", interpreterPort, "", mine.TrafficAccessToken, false, 299},
		{"both tokens", interpreterPort, mine.EnvdAccessToken, "wrong", false, 299},
		{"a wrong envd token is not saved by the traffic one", interpreterPort, "wrong", mine.TrafficAccessToken, false, 401},
		{"traffic token on envd", envdPort, "", mine.TrafficAccessToken, false, 401},
		{"wrong traffic token", interpreterPort, "", "00" + mine.TrafficAccessToken[2:], false, 401},
		{"another sandbox's traffic token", interpreterPort, "", theirs.TrafficAccessToken, false, 401},
		{"the envd token as traffic token", interpreterPort, "", mine.EnvdAccessToken, false, 401},
		{"two traffic tokens", interpreterPort, "", mine.TrafficAccessToken, true, 401},
		{"empty traffic token", interpreterPort, "", "", false, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/contexts", nil)
			r.Header.Set(headerSandboxID, mine.SandboxID)
			r.Header.Set(headerSandboxPort, tt.port)
			if tt.envd != "" {
				r.Header.Set(headerAccessToken, tt.envd)
			}
			r.Header.Set("E2B-Traffic-Access-Token", tt.traffic)
			if tt.double {
				r.Header.Add("E2B-Traffic-Access-Token", tt.traffic)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Errorf("= %d %s, want %d", w.Code, w.Body, tt.status)
			}
			if tt.status == http.StatusUnauthorized && w.Header().Get("X-Reached") != "" {
				t.Errorf("a refused call reached %s", w.Header().Get("X-Reached"))
			}
		})
	}
}
