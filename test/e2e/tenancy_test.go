package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHugeRlimitsRunOrAreRefused: pids and open files at the spec's
// bound (1048576) either run or are refused up front with the real bound
// named (the hard rlimit the init inherits and cannot raise), never fail
// half-way through building the sandbox.
func TestHugeRlimitsRunOrAreRefused(t *testing.T) {
	requireSandbox(t)
	for _, args := range [][]string{
		{"--pids", "1048576"},
		{"--open-files", "1048576"},
		{"--pids", "1048576", "--open-files", "1048576"},
	} {
		inv := warden(t, "", append(append([]string{"run"}, args...), "--", "true")...)
		if inv.code == 0 {
			continue // this host lets Warden's init have them
		}
		if inv.code != 125 {
			t.Errorf("warden run %q: exit %d (stderr %q), want 0 or 125", args, inv.code, inv.stderr)
			continue
		}
		checkOneLine(t, inv.stderr, "is above", "the hard RLIMIT_", "ask for at most")
	}
}

// TestServeSharesAndCeilings is the red team's two-key attack on the
// defaults: one key cannot take every slot, and limits above the host's
// ceilings are a 400 naming the flag, not a sandbox.
func TestServeSharesAndCeilings(t *testing.T) {
	srv := startServer(t, "--max-sessions", "4")
	for range 2 {
		srv.newSession(t, keyA, nil)
	}
	if code, b := srv.call(t, keyA, "POST", "/v1/sessions", strings.NewReader(`{}`), "application/json"); code != http.StatusTooManyRequests {
		t.Errorf("keyA's third session of --max-sessions 4 with two keys = %d %s, want 429", code, b)
	}
	for range 2 {
		srv.newSession(t, keyB, nil)
	}
	tests := []struct{ path, body, want string }{
		{"/v1/sessions", `{"limits":{"memory_bytes":68719476736}}`, "(set by --max-memory)"},
		{"/v1/sessions", `{"limits":{"cpus":1024}}`, "(set by --max-cpus)"},
		{"/v1/sessions", `{"ttl_seconds":86400}`, "--max-ttl"},
		{"/v1/run", `{"command":["true"],"limits":{"timeout_seconds":86400}}`, "(set by --max-timeout)"},
		{"/v1/run", `{"command":["true"],"limits":{"pids":1048576}}`, "(set by --max-pids)"},
	}
	for _, tt := range tests {
		code, b := srv.call(t, keyB, "POST", tt.path, strings.NewReader(tt.body), "application/json")
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error.Message, tt.want) {
			t.Errorf("POST %s %s = %d %s, want 400 naming %s", tt.path, tt.body, code, b, tt.want)
		}
	}
}

// TestServeHugeRlimitsWithoutCeilings: with the pids and open files
// ceilings off, values the init cannot have are a 400 naming the real
// bound, not a 500 from a sandbox that died while starting.
func TestServeHugeRlimitsWithoutCeilings(t *testing.T) {
	srv := startServer(t, "--max-pids", "0", "--max-open-files", "0")
	for _, body := range []string{`{"limits":{"pids":1048576}}`, `{"limits":{"open_files":1048576}}`} {
		code, b := srv.call(t, keyA, "POST", "/v1/sessions", strings.NewReader(body), "application/json")
		if code != http.StatusCreated && (code != http.StatusBadRequest || !strings.Contains(string(b), "the hard RLIMIT_")) {
			t.Errorf("POST /v1/sessions %s = %d %s, want 201, or 400 naming the hard limit", body, code, b)
		}
	}
}

// TestMCPHTTPShare: serve's /mcp acts for the key's tenant under the same
// share and ceilings as the API.
func TestMCPHTTPShare(t *testing.T) {
	srv := startServer(t, "--max-sessions", "4")
	cs := mcpConnect(t, &mcp.StreamableClientTransport{
		Endpoint: srv.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{keyA}}, MaxRetries: -1,
	})
	for range 2 {
		mcpSessionID(t, mcpCall(t, cs, "create_session", map[string]any{}))
	}
	if res := mcpCall(t, cs, "create_session", map[string]any{}); !res.IsError || !strings.Contains(mcpText(t, res), "this key holds 2 sessions and runs, its limit is 2") {
		t.Errorf("keyA's third create_session = error %v %q, want its share of 2 named", res.IsError, mcpText(t, res))
	}
	if code, b := srv.call(t, keyA, "POST", "/v1/sessions", strings.NewReader(`{}`), "application/json"); code != http.StatusTooManyRequests {
		t.Errorf("keyA's API session past its share = %d %s, want 429", code, b)
	}
	srv.newSession(t, keyB, nil)
	if res := mcpCall(t, cs, "create_session", map[string]any{"ttl_seconds": 86400}); !res.IsError || !strings.Contains(mcpText(t, res), "--max-ttl") {
		t.Errorf("create_session with a day's ttl = error %v %q, want --max-ttl named", res.IsError, mcpText(t, res))
	}
}
