package server

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

func TestMetrics(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MetricsKeys = []string{keyOperator} })
	id := h.create(keyA)
	h.do("POST", "/v1/sessions/"+id+"/exec", keyA, `{"command":["true"]}`)
	h.fake.exec = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		return spec.Result{ExitCode: 124, TimedOut: true, QueuedMS: 250}, nil
	}
	h.do("POST", "/v1/sessions/"+id+"/exec", keyA, `{"language":"python","code":"while 1: pass"}`)
	h.do("GET", "/v1/sessions", "", "")
	h.do("POST", "/v1/sessions", keyA, `{"limits":{"pids":0}}`)
	h.srv.ObserveReap(ownerOf(keyA), "idle")

	resp := h.do("GET", "/metrics", keyOperator, "")
	if resp.status != http.StatusOK {
		t.Fatalf("metrics: got %d %s", resp.status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("metrics Content-Type %q", ct)
	}
	checkExposition(t, string(resp.body))
	for _, want := range []string{
		`warden_sessions{state="ready"} 1`,
		`warden_sessions{state="busy"} 0`,
		`warden_execs_total{kind="command",outcome="ok"} 1`,
		`warden_execs_total{kind="python",outcome="timeout"} 1`,
		`warden_exec_duration_seconds_bucket{kind="command",le="0.001"}`,
		`warden_kills_total{reason="timeout"} 1`,
		`warden_exec_paced_seconds_total{kind="python"} 0.25`,
		`warden_kills_total{reason="idle"} 1`,
		`warden_denied_requests_total{reason="unauthorized"} 1`,
		`warden_denied_requests_total{reason="invalid"} 1`,
		"go_goroutines ",
		"go_memstats_heap_alloc_bytes ",
		"process_start_time_seconds ",
	} {
		if !bytes.Contains(resp.body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// sampleLine is `name{label="value",...} value` of the text format 0.0.4,
// with the label braces optional and values escaped.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)` +
	`(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? (\S+)$`)

// checkExposition parses a /metrics body: every sample line is well
// formed with a float value, and belongs to a family whose HELP and TYPE
// came before it.
func checkExposition(t *testing.T, body string) {
	t.Helper()
	help, typ := map[string]bool{}, map[string]string{}
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			help[name] = true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			if typ[name] != "" {
				t.Errorf("TYPE of %s repeated", name)
			}
			typ[name] = kind
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("malformed line %q", line)
			continue
		}
		if _, err := strconv.ParseFloat(m[3], 64); err != nil {
			t.Errorf("line %q: value: %v", line, err)
		}
		family := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(family, suffix); ok && typ[base] == "histogram" {
				family = base
			}
		}
		if !help[family] || typ[family] == "" {
			t.Errorf("line %q: family %s lacks HELP or TYPE before it", line, family)
		}
	}
}

func TestPanicIsRecovered(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	h.fake.exec = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		panic("boom")
	}
	resp := h.do("POST", "/v1/sessions/"+id+"/exec", keyA, `{"command":["true"]}`)
	code, msg := resp.errorMessage()
	if resp.status != http.StatusInternalServerError || code != "internal" || msg != "internal error" {
		t.Errorf("got %d %s, want 500 internal error", resp.status, resp.body)
	}
	if !strings.Contains(h.logs.String(), "handler panicked") || !strings.Contains(h.logs.String(), "boom") {
		t.Errorf("the panic was not logged:\n%s", h.logs.String())
	}
	h.healthy()
}

func TestRequestLog(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	h.do("GET", "/v1/sessions/"+id+"?token=x", keyA, "")
	logs := h.logs.String()
	if !strings.Contains(logs, `route="GET /v1/sessions/{id}" status=200`) || !strings.Contains(logs, "owner="+ownerOf(keyA)) {
		t.Errorf("request log lacks the route, status or owner:\n%s", logs)
	}
	if strings.Contains(logs, id) || strings.Contains(logs, keyA) {
		t.Errorf("request log carries an id or a key:\n%s", logs)
	}
}

func TestOpenAPIYAML(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.do("GET", "/openapi.yaml", "", "")
	if resp.status != http.StatusOK || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/yaml") {
		t.Fatalf("got %d %v", resp.status, resp.header)
	}
	if bytes.HasPrefix(resp.body, []byte("{")) {
		t.Errorf("the spec is served as JSON, not YAML")
	}
	doc, err := openapi3.NewLoader().LoadFromData(resp.body)
	if err != nil {
		t.Fatalf("served spec does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("served spec is not valid: %v", err)
	}
	if doc.Paths.Value("/v1/sessions/{id}/exec/stream") == nil {
		t.Errorf("served spec lacks the stream route")
	}
}

func TestUnknownRoute(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.do("GET", "/v1/nothing", keyA, "")
	code, msg := resp.errorMessage()
	if resp.status != http.StatusNotFound || code != "not_found" || msg != "no route for GET /v1/nothing; see /openapi.yaml" {
		t.Errorf("got %d %s", resp.status, resp.body)
	}
}
