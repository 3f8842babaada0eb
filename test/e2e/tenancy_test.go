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
//
// The memory and CPU ceilings are given: their defaults follow the host,
// and the test must not.
func TestServeSharesAndCeilings(t *testing.T) {
	srv := startServer(t, "--max-sessions", "4", "--max-memory", "6GiB", "--max-cpus", "2")
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
		if code != http.StatusCreated && (code != http.StatusBadRequest || !strings.Contains(string(b), "(set by warden's hard RLIMIT_")) {
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
	// The schema offers no more than the Manager's cap (6h, the default).
	if res := mcpCall(t, cs, "create_session", map[string]any{"ttl_seconds": 86400}); !res.IsError || !strings.Contains(mcpText(t, res), "21600") {
		t.Errorf("create_session with a day's ttl = error %v %q, want the cap of 21600 named", res.IsError, mcpText(t, res))
	}
}

// TestServeCeilingsBelowDefaults: ceilings under the built-in defaults
// start a server whose defaults are lowered to them, so a request asking
// for nothing is served, on the API and through the pool.
func TestServeCeilingsBelowDefaults(t *testing.T) {
	srv := startServer(t, "--max-timeout", "30s", "--max-memory", "256MiB", "--max-cpus", "0.5", "--max-open-files", "512", "--pool", "1")
	id := srv.newSession(t, keyA, nil)
	code, b := srv.call(t, keyA, "GET", "/v1/sessions/"+id, nil, "")
	if code != http.StatusOK || !strings.Contains(string(b), `"memory_bytes":268435456`) || !strings.Contains(string(b), `"open_files":512`) {
		t.Errorf("GET the session = %d %s, want the lowered memory and open files", code, b)
	}
	if code, b := srv.call(t, keyA, "POST", "/v1/run", strings.NewReader(`{"command":["true"]}`), "application/json"); code != http.StatusOK {
		t.Errorf("POST /v1/run with no limits = %d %s, want 200", code, b)
	}
	srv.stop()
	if logs, _ := srv.exit(); !strings.Contains(logs, "the default memory limit is lowered from 512MiB to 256MiB, the ceiling set by --max-memory") {
		t.Errorf("serve's log does not tell of the lowered default memory:\n%s", logs)
	}
}

// TestServeUnderLowHardRlimit: under `ulimit -Hn 512` the open files
// ceiling and default become 512 and the server serves; under 20, which
// no sandbox can work with, it refuses to start naming the fix.
func TestServeUnderLowHardRlimit(t *testing.T) {
	srv := startServerAs(t, []string{"prlimit", "--nofile=512:512", "--"}, "--pool", "1")
	srv.newSession(t, keyA, nil)
	if code, b := srv.call(t, keyA, "POST", "/v1/run", strings.NewReader(`{"command":["true"]}`), "application/json"); code != http.StatusOK {
		t.Errorf("POST /v1/run under a hard limit of 512 files = %d %s, want 200", code, b)
	}
	srv.stop()
	if logs, _ := srv.exit(); !strings.Contains(logs, "lowered from 65536 to 512, warden's hard RLIMIT_NOFILE") {
		t.Errorf("serve's log does not tell of the lowered ceiling:\n%s", logs)
	}
	inv := wardenAs(t, []string{"prlimit", "--nofile=20:20", "--"}, "", "serve", "--listen", "127.0.0.1:0", "--state-dir", "none")
	if inv.code == 0 || !strings.Contains(inv.stderr, "warden's hard RLIMIT_NOFILE is 20, below the 64 open files a sandbox needs") || !strings.Contains(inv.stderr, "ulimit -Hn") {
		t.Errorf("serve under 20 open files: exit %d, stderr %q; want a refusal naming the limit and ulimit -Hn", inv.code, inv.stderr)
	}
}

// TestCLIMCPLimitFlagAboveCeiling: warden mcp refuses a limit flag given
// above its ceiling with both flags named, before serving anything.
func TestCLIMCPLimitFlagAboveCeiling(t *testing.T) {
	requireSandbox(t)
	inv := warden(t, "", "mcp", "--memory", "100GiB", "--max-memory", "5GiB")
	const want = "--memory 100GiB is above --max-memory 5GiB: lower --memory or raise --max-memory (0: no ceiling)"
	if inv.code == 0 || !strings.Contains(inv.stderr, want) {
		t.Errorf("warden mcp --memory 100GiB --max-memory 5GiB: exit %d, stderr %q; want %q", inv.code, inv.stderr, want)
	}
	inv = warden(t, "", "serve", "--max-ttl", "48h", "--listen", "127.0.0.1:0", "--state-dir", "none")
	if inv.code == 0 || !strings.Contains(inv.stderr, "--max-ttl 48h0m0s is out of range: use up to 24h0m0s") {
		t.Errorf("warden serve --max-ttl 48h: exit %d, stderr %q; want the API's 24h named", inv.code, inv.stderr)
	}
}

// TestServeMetricsPerTenant: through `warden serve` and its
// WARDEN_METRICS_KEYS, a tenant's /metrics has no trace of another
// tenant's session nor any server-wide figure, and the operator's key
// sees the whole server.
func TestServeMetricsPerTenant(t *testing.T) {
	srv := startServer(t)
	srv.newSession(t, keyB, nil)
	tests := []struct {
		key       string
		want, not []string
	}{
		{keyA, []string{`warden_sessions{state="ready"} 0`}, []string{`warden_sessions{state="ready"} 1`, "go_", "process_", "warden_connections"}},
		{keyB, []string{`warden_sessions{state="ready"} 1`}, []string{"go_", "process_", "warden_connections"}},
		{keyOperator, []string{`warden_sessions{state="ready"} 1`, "go_goroutines ", "warden_connections_max "}, nil},
	}
	for _, tt := range tests {
		code, b := srv.call(t, tt.key, "GET", "/metrics", nil, "")
		if code != http.StatusOK {
			t.Fatalf("/metrics for %s: %d %s, want 200", tt.key, code, b)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("/metrics for %s lacks %q", tt.key, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(string(b), n) {
				t.Errorf("/metrics for %s shows %q", tt.key, n)
			}
		}
	}
	if code, b := srv.call(t, keyOperator, "GET", "/v1/sessions", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("the metrics key on /v1/sessions: %d %s, want 401", code, b)
	}
}
