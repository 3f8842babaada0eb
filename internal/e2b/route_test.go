package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// reached answers 299 and names the sandbox the router gave it, standing
// in for the envd and interpreter muxes.
func reached(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb := sandboxFrom(r.Context())
		if sb == nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Reached", port+" "+sb.ID)
		w.WriteHeader(299)
	})
}

// flipped is a hex token with its first digit changed: wrong, but of the
// right length.
func flipped(tok string) string {
	if tok[0] == '0' {
		return "1" + tok[1:]
	}
	return "0" + tok[1:]
}

// dataCall sends a data-plane request; empty header values are left out,
// and extra adds a second value of a header. A token "traffic:T" is sent
// as the E2B-Traffic-Access-Token T.
func dataCall(h http.Handler, path, id, token, port, extra string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, nil)
	tokenHeader := headerAccessToken
	if t, ok := strings.CutPrefix(token, "traffic:"); ok {
		tokenHeader, token = headerTrafficToken, t
	}
	for k, v := range map[string]string{headerSandboxID: id, tokenHeader: token, headerSandboxPort: port} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	if extra != "" {
		r.Header.Add(extra, "second")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestRouter: a data-plane call reaches its port's service only with its
// own sandbox's token; every refusal looks the same whether the id exists
// or not, in Connect's shape for a Connect call.
func TestRouter(t *testing.T) {
	s, f, h := newControlServer(t, nil)
	s.envd, s.interp = reached(envdPort), reached(interpreterPort)
	mine := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	theirs := created(t, h, ctlKeyBob, `{"templateID":"base"}`)
	gone := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	f.drop(gone.SandboxID)
	const rpc = "/process.Process/Start"
	tests := []struct {
		name, path, id, token, port, extra string
		status                             int
		reached                            string
	}{
		{"envd", "/files", mine.SandboxID, mine.EnvdAccessToken, envdPort, "", 299, "49983 " + mine.SandboxID},
		{"interpreter", "/execute", mine.SandboxID, mine.EnvdAccessToken, interpreterPort, "", 299, "49999 " + mine.SandboxID},
		{"interpreter by traffic token", "/contexts", mine.SandboxID, "traffic:" + mine.TrafficAccessToken, interpreterPort, "", 299, "49999 " + mine.SandboxID},
		{"interpreter by another's traffic token", "/contexts", mine.SandboxID, "traffic:" + theirs.TrafficAccessToken, interpreterPort, "", 401, ""},
		{"interpreter, envd token as traffic token", "/contexts", mine.SandboxID, "traffic:" + mine.EnvdAccessToken, interpreterPort, "", 401, ""},
		{"envd by traffic token", "/files", mine.SandboxID, "traffic:" + mine.TrafficAccessToken, envdPort, "", 401, ""},
		{"two traffic tokens", "/contexts", mine.SandboxID, "traffic:" + mine.TrafficAccessToken, interpreterPort, headerTrafficToken, 401, ""},
		{"no token", rpc, mine.SandboxID, "", envdPort, "", 401, ""},
		{"wrong token", rpc, mine.SandboxID, flipped(mine.EnvdAccessToken), envdPort, "", 401, ""},
		{"traffic token", rpc, mine.SandboxID, mine.TrafficAccessToken, envdPort, "", 401, ""},
		{"another sandbox's token", rpc, mine.SandboxID, theirs.EnvdAccessToken, envdPort, "", 401, ""},
		{"unknown id", rpc, "ses_nope", mine.EnvdAccessToken, envdPort, "", 401, ""},
		{"two ids", rpc, mine.SandboxID, mine.EnvdAccessToken, envdPort, headerSandboxID, 401, ""},
		{"two tokens", rpc, mine.SandboxID, mine.EnvdAccessToken, envdPort, headerAccessToken, 401, ""},
		{"two ports", "/files", mine.SandboxID, mine.EnvdAccessToken, envdPort, headerSandboxPort, 401, ""},
		{"other port", "/", mine.SandboxID, mine.EnvdAccessToken, "8080", "", 502, ""},
		{"no port", "/", mine.SandboxID, mine.EnvdAccessToken, "", "", 502, ""},
		{"gone sandbox, another's token", rpc, gone.SandboxID, mine.EnvdAccessToken, envdPort, "", 401, ""},
		{"no id is Warden's", "/v1/sessions", "", "", "", "", http.StatusTeapot, ""},
	}
	refusals := map[bool]string{} // by whether the path is a Connect call
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := dataCall(h, tt.path, tt.id, tt.token, tt.port, tt.extra)
			if w.Code != tt.status || w.Header().Get("X-Reached") != tt.reached {
				t.Fatalf("= %d reaching %q (%s), want %d reaching %q", w.Code, w.Header().Get("X-Reached"), w.Body, tt.status, tt.reached)
			}
			if tt.status != http.StatusUnauthorized {
				return
			}
			connect := isConnect(tt.path)
			if connect {
				var body struct{ Code, Message string }
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Code != "unauthenticated" {
					t.Errorf("body %s, want Connect's unauthenticated error", w.Body)
				}
			} else {
				errorBody(t, w, http.StatusUnauthorized, "unauthorized")
			}
			if refusals[connect] == "" {
				refusals[connect] = w.Body.String()
			} else if w.Body.String() != refusals[connect] {
				t.Errorf("refusal %s differs from %s: it must not tell why", w.Body, refusals[connect])
			}
		})
	}
}

// TestRouterGoneWithToken: the holder of a sandbox's token learns that it
// ended (502, as E2B's proxy answers), every time, whether it was killed
// or its session ended behind the front end's back; the registry keeps
// only a bounded memory of ended sandboxes.
func TestRouterGoneWithToken(t *testing.T) {
	s, f, h := newControlServer(t, nil)
	s.envd = reached(envdPort)
	reaped := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	killed := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	f.drop(reaped.SandboxID)
	if w := controlCall(h, "DELETE", "/sandboxes/"+killed.SandboxID, ctlKeyAlice, ""); w.Code != http.StatusNoContent {
		t.Fatalf("kill = %d", w.Code)
	}
	for _, sb := range []sandboxJSON{reaped, killed} {
		for range 2 {
			w := dataCall(h, "/health", sb.SandboxID, sb.EnvdAccessToken, envdPort, "")
			errorBody(t, w, http.StatusBadGateway, "is not running")
		}
		if s.sandboxes.peek(sb.SandboxID) != nil {
			t.Errorf("ended sandbox %s is still live in the registry", sb.SandboxID)
		}
		if w := dataCall(h, "/health", sb.SandboxID, flipped(sb.EnvdAccessToken), envdPort, ""); w.Code != http.StatusUnauthorized {
			t.Errorf("an ended sandbox with a wrong token = %d, want 401", w.Code)
		}
	}
}

// TestRegistryEndedBound: the memory of ended sandboxes keeps the newest
// maxEnded.
func TestRegistryEndedBound(t *testing.T) {
	g := newRegistry(newControlFake(), defaultMaxSandboxes)
	for i := range maxEnded + 10 {
		sb := &Sandbox{ID: fmt.Sprintf("s%d", i), Owner: "alice"}
		if err := g.add(sb); err != nil {
			t.Fatal(err)
		}
		g.forget(sb)
	}
	if len(g.ended) != maxEnded || len(g.endedOrder) != maxEnded || g.len() != 0 {
		t.Errorf("%d ended (%d in order), %d live; want %d, %d, 0", len(g.ended), len(g.endedOrder), g.len(), maxEnded, maxEnded)
	}
	if _, _, ended := g.peekAny("s0"); ended {
		t.Error("the oldest ended sandbox is still remembered")
	}
	if _, _, ended := g.peekAny(fmt.Sprintf("s%d", maxEnded+9)); !ended {
		t.Error("the newest ended sandbox is forgotten")
	}
}

// TestRouterPacesBodies: only a checked call's body is handed to
// Config.PaceBody.
func TestRouterPacesBodies(t *testing.T) {
	paced := 0
	s, _, h := newControlServer(t, func(c *Config) {
		c.PaceBody = func(http.ResponseWriter, *http.Request, int64) { paced++ }
	})
	s.envd = reached(envdPort)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	dataCall(h, "/files", sb.SandboxID, "wrong", envdPort, "")
	if paced != 0 {
		t.Fatalf("a refused call's body was paced")
	}
	dataCall(h, "/files", sb.SandboxID, sb.EnvdAccessToken, envdPort, "")
	if paced != 1 {
		t.Errorf("a checked call's body was paced %d times, want 1", paced)
	}
}

// TestHealth: envd's GET /health answers 204 to a checked call, and 502
// while the sandbox is paused (the SDK's isRunning() is then false).
func TestHealth(t *testing.T) {
	_, _, h := newControlServer(t, nil)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	r := httptest.NewRequest("GET", "/health", nil)
	r.Header.Set(headerSandboxID, sb.SandboxID)
	r.Header.Set(headerSandboxPort, envdPort)
	r.Header.Set(headerAccessToken, sb.EnvdAccessToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Errorf("GET /health = %d %s, want 204", w.Code, w.Body)
	}
	if w := controlCall(h, "POST", "/sandboxes/"+sb.SandboxID+"/pause", ctlKeyAlice, ""); w.Code != http.StatusNoContent {
		t.Fatalf("pause = %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	errorBody(t, w, http.StatusBadGateway, "is paused")
}

// FuzzRouterHeaders: whatever the headers and path, the router never
// panics, and a call reaches a service only with the sandbox's own id
// and token.
func FuzzRouterHeaders(f *testing.F) {
	s, _, h := newControlServerF(f)
	s.envd, s.interp = reached(envdPort), reached(interpreterPort)
	w := controlCall(h, "POST", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base"}`)
	var sb sandboxJSON
	if err := json.Unmarshal(w.Body.Bytes(), &sb); err != nil {
		f.Fatal(err)
	}
	f.Add(sb.SandboxID, sb.EnvdAccessToken, "", envdPort, "/files")
	f.Add(sb.SandboxID, "", sb.TrafficAccessToken, interpreterPort, "/contexts")
	f.Add(sb.SandboxID, sb.EnvdAccessToken, sb.TrafficAccessToken, envdPort, "/execute")
	f.Add("ses_x", sb.EnvdAccessToken, "", "49983", "/process.Process/Start")
	f.Add(sb.SandboxID+"\x00", sb.EnvdAccessToken, "", " 49983", "/filesystem.Filesystem/Stat")
	f.Fuzz(func(t *testing.T, id, token, traffic, port, path string) {
		r := httptest.NewRequest("POST", "/", nil)
		r.URL.Path = "/" + path
		r.Header[headerSandboxID] = []string{id}
		r.Header[headerAccessToken] = []string{token}
		r.Header[headerTrafficToken] = []string{traffic}
		r.Header[headerSandboxPort] = []string{port}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == 299 && (id != sb.SandboxID || (token != sb.EnvdAccessToken && traffic != sb.TrafficAccessToken)) {
			t.Fatalf("id %q token %q traffic %q reached %s", id, token, traffic, w.Header().Get("X-Reached"))
		}
		if w.Code != 299 && w.Code != http.StatusUnauthorized && w.Code != http.StatusBadGateway {
			t.Fatalf("answer %d, want 299, 401 or 502", w.Code)
		}
	})
}

// TestRouterLogsKnownPorts: the route a data-plane call is logged under
// names only a port Warden serves, never what the client wrote.
func TestRouterLogsKnownPorts(t *testing.T) {
	var routes []string
	s, _, h := newControlServer(t, func(c *Config) {
		c.Admit = func(_ *http.Request, _, route string) { routes = append(routes, route) }
	})
	s.envd = reached(envdPort)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	routes = nil
	for _, port := range []string{envdPort, "evil\tforged=1"} {
		dataCall(h, "/health", sb.SandboxID, sb.EnvdAccessToken, port, "")
	}
	want := []string{"e2b 49983 POST /health", "e2b (other) POST /health"}
	if strings.Join(routes, "|") != strings.Join(want, "|") {
		t.Errorf("logged routes %q, want %q", routes, want)
	}
}

// TestPastExpiryIsEnded: a sandbox whose expiry has passed answers as
// ended at once, to GET, to the list and on the data plane, though the
// reaper has not ended its session yet (E2B's "shorten timeout"). Each
// check has its own sandbox, as the first to see one expired forgets it.
func TestPastExpiryIsEnded(t *testing.T) {
	s, _, h := newControlServer(t, nil)
	s.envd = reached(envdPort)
	var ids [3]sandboxJSON
	for i := range ids {
		ids[i] = created(t, h, ctlKeyAlice, `{"templateID":"base","timeout":60}`)
	}
	if w := dataCall(h, "/health", ids[0].SandboxID, ids[0].EnvdAccessToken, envdPort, ""); w.Code != 299 {
		t.Fatalf("before expiry: data call = %d %s, want 299", w.Code, w.Body)
	}
	s.sandboxes.now = func() time.Time { return time.Now().Add(time.Hour) }
	errorBody(t, dataCall(h, "/health", ids[0].SandboxID, ids[0].EnvdAccessToken, envdPort, ""), http.StatusBadGateway, "is not running")
	errorBody(t, controlCall(h, "GET", "/sandboxes/"+ids[1].SandboxID, ctlKeyAlice, ""), http.StatusNotFound, "not found")
	if w := controlCall(h, "GET", "/v2/sandboxes", ctlKeyAlice, ""); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("list after expiry = %d %s, want 200 []", w.Code, w.Body)
	}
}
