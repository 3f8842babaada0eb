package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// created creates a sandbox for key and answers it, failing the test if
// that fails.
func created(t *testing.T, h http.Handler, key, body string) sandboxJSON {
	t.Helper()
	w := controlCall(h, "POST", "/v2/sandboxes", key, body)
	if w.Code != http.StatusCreated {
		t.Fatalf("create = %d %s, want 201", w.Code, w.Body)
	}
	var sb sandboxJSON
	if err := json.Unmarshal(w.Body.Bytes(), &sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

// errorBody checks an answer is E2B's error: the status, a JSON body
// {"code": status, "message": ...} on one line, with want in the message.
func errorBody(t *testing.T, got interface {
	Result() *http.Response
}, status int, want string) {
	t.Helper()
	resp := got.Result()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("answer %d is not E2B's JSON error: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != status || body.Code != status {
		t.Errorf("answer %d with code %d (%q), want %d", resp.StatusCode, body.Code, body.Message, status)
	}
	if !strings.Contains(body.Message, want) || strings.Contains(body.Message, "\n") {
		t.Errorf("message %q, want one line containing %q", body.Message, want)
	}
}

var hexToken = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestCreateSandbox: both create paths make a session with the default
// limits and answer E2B's Sandbox with fresh tokens; what Warden cannot
// honour is refused by name.
func TestCreateSandbox(t *testing.T) {
	tests := []struct {
		name, path, key, body string
		status                int
		want                  string // in the error message
	}{
		{"v2 defaults", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base"}`, 201, ""},
		{"v1 as e2b@2.50.0 sends it", "/sandboxes", ctlKeyAlice, `{"templateID":"base","timeout":300,"secure":true,"allow_internet_access":true}`, 201, ""},
		{"code interpreter", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"code-interpreter-v1","metadata":{"a":"b"},"envVars":{"X":"1"}}`, 201, ""},
		{"unknown fields are ignored", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","futureField":1}`, 201, ""},
		{"no key", "/v2/sandboxes", "", `{"templateID":"base"}`, 401, "missing X-API-Key"},
		{"wrong key", "/v2/sandboxes", "nobody", `{"templateID":"base"}`, 401, "E2B_API_KEY must be one of"},
		{"unknown template", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"desktop"}`, 404, `template "desktop" not found`},
		{"no template", "/v2/sandboxes", ctlKeyAlice, `{}`, 400, "templateID: is required"},
		{"insecure", "/sandboxes", ctlKeyAlice, `{"templateID":"base","secure":false}`, 400, "secure: false"},
		{"auto pause", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","autoPause":true}`, 400, "autoPause"},
		{"auto resume", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","autoResume":{"enabled":true}}`, 400, "autoResume"},
		{"mcp", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","mcp":{"x":{}}}`, 400, "mcp"},
		{"volumes", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]}`, 400, "volumeMounts"},
		{"zero timeout", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","timeout":0}`, 400, "timeout"},
		{"timeout past the ceiling", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","timeout":86400}`, 400, "--max-ttl"},
		{"timeout not a number", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","timeout":"5m"}`, 400, "timeout: must be int64"},
		{"bad env name", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","envVars":{"1X":"y"}}`, 400, `name "1X" is not valid`},
		{"NUL in env", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","envVars":{"X":"a\u0000b"}}`, 400, "NUL"},
		{"not JSON", "/v2/sandboxes", ctlKeyAlice, `{"templateID":`, 400, "not valid JSON"},
		{"trailing data", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base"} {}`, 400, "more data"},
		{"no body", "/v2/sandboxes", ctlKeyAlice, ``, 400, "body is required"},
		{"huge body", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","metadata":{"a":"` + strings.Repeat("x", maxControlBody) + `"}}`, 413, "larger than"},
		{"huge metadata", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","metadata":{"a":"` + strings.Repeat("x", maxMetadataBytes) + `"}}`, 400, "metadata"},
		{"CIDR allowed", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","network":{"allowOut":["10.0.0.0/8"]}}`, 400, "CIDR"},
		{"deny without allow", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","network":{"denyOut":["1.1.1.1"]}}`, 400, "without allowOut"},
		{"rules", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","network":{"rules":{"a.com":[]}}}`, 400, "network.rules"},
		{"https ports", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base","network":{"httpsPorts":[443]}}`, 400, "httpsPorts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f, h := newControlServer(t, nil)
			w := controlCall(h, "POST", tt.path, tt.key, tt.body)
			if tt.status != http.StatusCreated {
				errorBody(t, w, tt.status, tt.want)
				if n := len(f.List("alice")); n != 0 {
					t.Errorf("%d sessions made by a refused create, want 0", n)
				}
				return
			}
			if w.Code != http.StatusCreated {
				t.Fatalf("create = %d %s, want 201", w.Code, w.Body)
			}
			var sb sandboxJSON
			if err := json.Unmarshal(w.Body.Bytes(), &sb); err != nil {
				t.Fatal(err)
			}
			info, err := f.Get(context.Background(), "alice", sb.SandboxID)
			if err != nil {
				t.Fatalf("sandboxID %q is not the session's id: %v", sb.SandboxID, err)
			}
			if !hexToken.MatchString(sb.EnvdAccessToken) || !hexToken.MatchString(sb.TrafficAccessToken) || sb.EnvdAccessToken == sb.TrafficAccessToken {
				t.Errorf("tokens %q and %q, want two different 32-byte hex tokens", sb.EnvdAccessToken, sb.TrafficAccessToken)
			}
			if sb.EnvdVersion != EnvdVersion || sb.ClientID == "" || sb.TemplateID == "" {
				t.Errorf("answer %+v lacks envdVersion %s, clientID or templateID", sb, EnvdVersion)
			}
			if info.Limits != spec.DefaultLimits || info.Network.Mode != spec.NetNone {
				t.Errorf("session limits %+v network %+v, want the defaults and no network", info.Limits, info.Network)
			}
			if got := info.ExpiresAt.Sub(info.CreatedAt); got != defaultTimeout {
				t.Errorf("session lives %v, want E2B's timeout %v", got, defaultTimeout)
			}
			if o := f.lastOptions; o.IdleTimeout != time.Hour {
				t.Errorf("idle timeout %v, want the server's longest (1h): E2B has none", o.IdleTimeout)
			}
		})
	}
}

// TestCreateMapsOptions: envVars become the session's environment and
// allowOut the egress proxy's allow rules.
func TestCreateMapsOptions(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	created(t, h, ctlKeyAlice, `{"templateID":"base","timeout":60,"envVars":{"B":"2","A":"1"},
		"network":{"allowOut":["pypi.org","1.2.3.4"],"denyOut":["0.0.0.0/0","5.6.7.8"]}}`)
	o := f.lastOptions
	if strings.Join(o.Env, " ") != "A=1 B=2" {
		t.Errorf("env %q, want [A=1 B=2]", o.Env)
	}
	if o.TTL != time.Minute {
		t.Errorf("ttl %v, want 1m", o.TTL)
	}
	want := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"pypi.org", "1.2.3.4"}, Deny: []string{"5.6.7.8"}}
	if o.Network.Mode != want.Mode || strings.Join(o.Network.Allow, ",") != strings.Join(want.Allow, ",") || strings.Join(o.Network.Deny, ",") != strings.Join(want.Deny, ",") {
		t.Errorf("network %+v, want %+v", o.Network, want)
	}
}

// TestSandboxByID: GET, DELETE, timeout, connect and pause act on the
// caller's own sandbox only; another key's, an unknown and a killed one
// get the same 404 JSON body.
func TestSandboxByID(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	mine := created(t, h, ctlKeyAlice, `{"templateID":"base","metadata":{"k":"v"}}`)
	id := mine.SandboxID
	tests := []struct {
		name, method, path, key, body string
		status                        int
	}{
		{"get", "GET", "/sandboxes/" + id, ctlKeyAlice, "", 200},
		{"get as another key", "GET", "/sandboxes/" + id, ctlKeyBob, "", 404},
		{"get unknown", "GET", "/sandboxes/ses_nope", ctlKeyAlice, "", 404},
		{"get without key", "GET", "/sandboxes/" + id, "", "", 401},
		{"timeout", "POST", "/sandboxes/" + id + "/timeout", ctlKeyAlice, `{"timeout":600}`, 204},
		{"timeout as another key", "POST", "/sandboxes/" + id + "/timeout", ctlKeyBob, `{"timeout":600}`, 404},
		{"timeout missing", "POST", "/sandboxes/" + id + "/timeout", ctlKeyAlice, `{}`, 400},
		{"timeout past the ceiling", "POST", "/sandboxes/" + id + "/timeout", ctlKeyAlice, `{"timeout":86400}`, 400},
		{"connect", "POST", "/sandboxes/" + id + "/connect", ctlKeyAlice, `{"timeout":300}`, 200},
		{"connect v2 without body", "POST", "/v2/sandboxes/" + id + "/connect", ctlKeyAlice, "", 200},
		{"connect as another key", "POST", "/v2/sandboxes/" + id + "/connect", ctlKeyBob, `{}`, 404},
		{"pause", "POST", "/sandboxes/" + id + "/pause", ctlKeyAlice, `{}`, 204},
		{"pause as another key", "POST", "/sandboxes/" + id + "/pause", ctlKeyBob, `{}`, 404},
		{"pause again", "POST", "/sandboxes/" + id + "/pause", ctlKeyAlice, "", 409},
		{"get paused", "GET", "/sandboxes/" + id, ctlKeyAlice, "", 200},
		{"connect resumes", "POST", "/sandboxes/" + id + "/connect", ctlKeyAlice, `{}`, 200},
		{"resume running", "POST", "/sandboxes/" + id + "/resume", ctlKeyAlice, "", 409},
		{"pause without memory snapshots", "POST", "/sandboxes/" + id + "/pause", ctlKeyAlice, `{"memory":false}`, 204},
		{"pause a snapshotted one", "POST", "/sandboxes/" + id + "/pause", ctlKeyAlice, "", 409},
		{"connect resumes a snapshotted one", "POST", "/sandboxes/" + id + "/connect", ctlKeyAlice, `{}`, 200},
		{"pause to resume", "POST", "/sandboxes/" + id + "/pause", ctlKeyAlice, "", 204},
		{"resume", "POST", "/sandboxes/" + id + "/resume", ctlKeyAlice, `{}`, 201},
		{"metrics not built", "GET", "/sandboxes/" + id + "/metrics", ctlKeyAlice, "", 501},
		{"templates not built", "GET", "/templates", ctlKeyAlice, "", 501},
		{"templates without key", "GET", "/templates", "", "", 401},
		{"newline in a path", "GET", "/templates/a%0Ab", ctlKeyAlice, "", 501},
		{"kill as another key", "DELETE", "/sandboxes/" + id, ctlKeyBob, "", 404},
		{"kill", "DELETE", "/sandboxes/" + id, ctlKeyAlice, "", 204},
		{"kill again", "DELETE", "/sandboxes/" + id, ctlKeyAlice, "", 404},
		{"get killed", "GET", "/sandboxes/" + id, ctlKeyAlice, "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := controlCall(h, tt.method, tt.path, tt.key, tt.body)
			switch {
			case tt.status >= 400:
				errorBody(t, w, tt.status, "")
			case w.Code != tt.status:
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, w.Code, w.Body, tt.status)
			}
		})
	}
	if _, err := f.Get(context.Background(), "alice", id); err == nil {
		t.Error("the session outlived its kill")
	}
}

// TestPauseDuringCopy: a sandbox paused only for a native snapshot's or
// fork's copy is not paused by its user, so E2B's pause pauses it (204,
// the Manager's Pause making the pause the user's) rather than answering
// 409 "already paused" and leaving the copy's end to resume it (issue
// 22); once paused by that call, a pause again answers 409.
func TestPauseDuringCopy(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	id := created(t, h, ctlKeyAlice, `{"templateID":"base"}`).SandboxID
	f.copyPause(id)
	if w := controlCall(h, "POST", "/sandboxes/"+id+"/pause", ctlKeyAlice, ""); w.Code != http.StatusNoContent {
		t.Fatalf("pause during a copy = %d %s, want 204", w.Code, w.Body)
	}
	got, err := f.Get(context.Background(), "alice", id)
	if err != nil || got.State != sandbox.StatePaused || got.CopyPaused {
		t.Errorf("after the pause: state %s, copy paused %v, %v; want %s by its user", got.State, got.CopyPaused, err, sandbox.StatePaused)
	}
	errorBody(t, controlCall(h, "POST", "/sandboxes/"+id+"/pause", ctlKeyAlice, ""), http.StatusConflict, "already paused")
}

// TestSandboxDetail: GET answers SandboxDetail with the session's figures,
// and connect answers the same tokens create did.
func TestSandboxDetail(t *testing.T) {
	_, _, h := newControlServer(t, nil)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"code-interpreter-v1","metadata":{"k":"v"}}`)
	w := controlCall(h, "GET", "/sandboxes/"+sb.SandboxID, ctlKeyAlice, "")
	var d detailJSON
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	want := listedJSON{
		SandboxID: sb.SandboxID, TemplateID: "code-interpreter-v1", Alias: "code-interpreter-v1", ClientID: clientID,
		CPUCount: 1, MemoryMB: 512, DiskSizeMB: 256, State: "running", EnvdVersion: EnvdVersion,
	}
	got := d.listedJSON
	got.StartedAt, got.EndAt, got.Metadata, got.VolumeMounts = time.Time{}, time.Time{}, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("detail %+v, want %+v", got, want)
	}
	if d.Metadata["k"] != "v" || d.EnvdAccessToken != sb.EnvdAccessToken || !d.EndAt.After(d.StartedAt) {
		t.Errorf("detail metadata %v, token %q, %v..%v: want the create's", d.Metadata, d.EnvdAccessToken, d.StartedAt, d.EndAt)
	}
	w = controlCall(h, "POST", "/sandboxes/"+sb.SandboxID+"/connect", ctlKeyAlice, `{"timeout":10}`)
	var c sandboxJSON
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c != sb {
		t.Errorf("connect answered %+v, want what create did, %+v", c, sb)
	}
}

// TestConnectOnlyExtends: connect's timeout lengthens a sandbox's life
// and never shortens it; setTimeout sets it either way.
func TestConnectOnlyExtends(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base","timeout":3600}`)
	before, _ := f.Get(context.Background(), "alice", sb.SandboxID)
	controlCall(h, "POST", "/sandboxes/"+sb.SandboxID+"/connect", ctlKeyAlice, `{"timeout":10}`)
	if after, _ := f.Get(context.Background(), "alice", sb.SandboxID); !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Errorf("connect with a shorter timeout moved the expiry from %v to %v", before.ExpiresAt, after.ExpiresAt)
	}
	start := time.Now()
	controlCall(h, "POST", "/sandboxes/"+sb.SandboxID+"/timeout", ctlKeyAlice, `{"timeout":10}`)
	if after, _ := f.Get(context.Background(), "alice", sb.SandboxID); after.ExpiresAt.Before(start.Add(10*time.Second)) || after.ExpiresAt.After(time.Now().Add(10*time.Second)) {
		t.Errorf("setTimeout(10) set the expiry to %v, want 10s from the call", after.ExpiresAt)
	}
}

// TestDeadSandbox: a session whose box died is no running sandbox: GET
// and connect say so with 404, lists leave it out, and kill still frees
// it.
func TestDeadSandbox(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	f.setState(sb.SandboxID, sandbox.StateDead)
	errorBody(t, controlCall(h, "GET", "/sandboxes/"+sb.SandboxID, ctlKeyAlice, ""), 404, "has ended")
	errorBody(t, controlCall(h, "POST", "/sandboxes/"+sb.SandboxID+"/connect", ctlKeyAlice, "{}"), 404, "has ended")
	if w := controlCall(h, "GET", "/v2/sandboxes", ctlKeyAlice, ""); strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("list = %s, want []", w.Body)
	}
	if w := controlCall(h, "DELETE", "/sandboxes/"+sb.SandboxID, ctlKeyAlice, ""); w.Code != http.StatusNoContent {
		t.Errorf("kill of a dead sandbox = %d %s, want 204", w.Code, w.Body)
	}
}

// TestNotE2B: Warden's own paths pass through untouched, with or without
// an X-API-Key.
func TestNotE2B(t *testing.T) {
	_, _, h := newControlServer(t, nil)
	for _, p := range []string{"/v1/sessions", "/healthz", "/metrics", "/mcp", "/openapi.yaml", "/"} {
		if w := controlCall(h, "GET", p, ctlKeyAlice, ""); w.Code != http.StatusTeapot {
			t.Errorf("GET %s = %d, want it passed on to Warden's API", p, w.Code)
		}
	}
}

// statusError is an error that says its HTTP status, as the server's are.
type statusError int

func (e statusError) Error() string   { return "server busy: retry" }
func (e statusError) HTTPStatus() int { return int(e) }

// TestReadBodyHook: control-plane bodies go through Config.ReadBody as
// the caller's, its error keeps its status, and the charge is always
// given back.
func TestReadBodyHook(t *testing.T) {
	var owners []string
	released := 0
	fail := false
	_, _, h := newControlServer(t, func(c *Config) {
		c.ReadBody = func(_ http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
			owners = append(owners, owner)
			if fail {
				return nil, func() { released++ }, statusError(http.StatusServiceUnavailable)
			}
			buf := make([]byte, 64)
			n, _ := r.Body.Read(buf)
			return buf[:n], func() { released++ }, nil
		}
	})
	created(t, h, ctlKeyBob, `{"templateID":"base"}`)
	fail = true
	errorBody(t, controlCall(h, "POST", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base"}`), http.StatusServiceUnavailable, "server busy")
	if strings.Join(owners, ",") != "bob,alice" || released != 2 {
		t.Errorf("read for %v, released %d times; want bob then alice, 2", owners, released)
	}
}

// TestControlTakesRequestContext: setTimeout and connect look the
// sandbox up and move its expiry under the request's context, so that
// a client gone stops their waits (an attach, on kubernetes): the fake
// sees each of those calls with the request's context ended.
func TestControlTakesRequestContext(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	sb := created(t, h, ctlKeyAlice, `{"templateID":"base","timeout":60}`)
	for _, call := range []struct{ target, body string }{
		{"/sandboxes/" + sb.SandboxID + "/timeout", `{"timeout":600}`},
		{"/sandboxes/" + sb.SandboxID + "/connect", `{"timeout":3600}`},
	} {
		f.mu.Lock()
		f.doneCalls = 0
		f.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest("POST", call.target, strings.NewReader(call.body)).WithContext(ctx)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-API-Key", ctlKeyAlice)
		h.ServeHTTP(httptest.NewRecorder(), r)
		f.mu.Lock()
		got := f.doneCalls
		f.mu.Unlock()
		if got != 2 {
			t.Errorf("%s with the client gone: %d lookups and expiry moves saw its context ended, want 2 (the lookup and the move)", call.target, got)
		}
	}
}
