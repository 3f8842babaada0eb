package server

import (
	"net/http"
	"strings"
	"testing"
)

// keyOperator is the harness's metrics key, where a test configures one.
const keyOperator = "key-operator-0123456789"

// TestMetricsShowATenantOnlyItsOwn has tenants A and B use the server
// and checks what each key's /metrics shows: a tenant only its own
// figures and no server-wide ones, the operator's key everything.
func TestMetricsShowATenantOnlyItsOwn(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MetricsKeys = []string{keyOperator} })
	for range 2 {
		id := h.create(keyB)
		h.do("POST", "/v1/sessions/"+id+"/exec", keyB, `{"command":["true"]}`)
	}
	h.do("POST", "/v1/sessions", keyB, `{"limits":{"pids":-1}}`)
	h.srv.ObserveReap(ownerOf(keyB), "ttl")
	h.do("GET", "/v1/sessions", "", "")
	a := h.create(keyA)
	h.do("POST", "/v1/sessions/"+a+"/exec", keyA, `{"language":"python","code":"1"}`)

	tests := []struct {
		key       string
		want, not []string
	}{
		{keyA,
			[]string{`warden_sessions{state="ready"} 1`, `warden_execs_total{kind="python",outcome="ok"} 1`},
			[]string{`kind="command"`, `reason="ttl"`, `reason="invalid"`, `reason="unauthorized"`, "go_", "process_"}},
		{keyB,
			[]string{`warden_sessions{state="ready"} 2`, `warden_execs_total{kind="command",outcome="ok"} 2`,
				`warden_kills_total{reason="ttl"} 1`, `warden_denied_requests_total{reason="invalid"} 1`},
			[]string{`kind="python"`, `reason="unauthorized"`, "go_", "process_"}},
		{keyOperator,
			[]string{`warden_sessions{state="ready"} 3`, `warden_execs_total{kind="command",outcome="ok"} 2`,
				`warden_execs_total{kind="python",outcome="ok"} 1`, `warden_denied_requests_total{reason="unauthorized"} 1`,
				"go_goroutines ", "process_start_time_seconds "},
			nil},
	}
	for _, tt := range tests {
		resp := h.do("GET", "/metrics", tt.key, "")
		if resp.status != http.StatusOK {
			t.Fatalf("metrics for %s: got %d %s, want 200", tt.key, resp.status, resp.body)
		}
		body := string(resp.body)
		checkExposition(t, body)
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("metrics for %s: lack %q; got:\n%s", tt.key, w, body)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(body, n) {
				t.Errorf("metrics for %s: show %q, another tenant's or the server's", tt.key, n)
			}
		}
	}
}

// TestMetricsKeyReadsMetricsOnly checks that a metrics key opens nothing
// but /metrics, and that a key cannot be a tenant's and the operator's.
func TestMetricsKeyReadsMetricsOnly(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MetricsKeys = []string{keyOperator} })
	for _, target := range []string{"/v1/sessions", "/mcp"} {
		resp := h.do("GET", target, keyOperator, "")
		if _, msg := resp.errorMessage(); resp.status != http.StatusUnauthorized || !strings.Contains(msg, "metrics key") {
			t.Errorf("GET %s with a metrics key: got %d %s, want 401 naming the metrics key", target, resp.status, resp.body)
		}
	}
	configs := []struct {
		name string
		cfg  Config
		want string
	}{
		{"key in both lists", Config{Keys: []string{keyA}, MetricsKeys: []string{keyA}}, "both an API key and a metrics key"},
		{"metrics keys alone", Config{AllowAnonymous: true, MetricsKeys: []string{keyOperator}}, "MetricsKeys without Keys"},
		{"empty metrics key", Config{Keys: []string{keyA}, MetricsKeys: []string{" "}}, "a metrics key is empty"},
	}
	for _, c := range configs {
		_, err := New(h.fake, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
