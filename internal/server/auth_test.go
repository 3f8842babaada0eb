package server

import (
	"net/http"
	"strings"
	"testing"
)

func TestNewRefusesUnsafeConfigs(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no keys", Config{}, "no API keys"},
		{"keys and anonymous", Config{Keys: []string{"k"}, AllowAnonymous: true}, "choose one"},
		{"empty key", Config{Keys: []string{" "}}, "an API key is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(newFake(t.TempDir()), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name   string
		method string
		target string
		header string
		body   string
		want   int
	}{
		{"no key", "GET", "/v1/sessions", "", "", http.StatusUnauthorized},
		{"wrong key", "GET", "/v1/sessions", "Bearer nope", "", http.StatusUnauthorized},
		{"other scheme", "GET", "/v1/sessions", "Basic " + keyA, "", http.StatusUnauthorized},
		{"a prefix of a key", "GET", "/v1/sessions", "Bearer " + keyA[:5], "", http.StatusUnauthorized},
		{"good key", "GET", "/v1/sessions", "Bearer " + keyA, "", http.StatusOK},
		{"lower-case scheme", "GET", "/v1/sessions", "bearer " + keyB, "", http.StatusOK},
		// Validation runs after auth: a stranger learns nothing of the
		// bounds, and an unknown route is no different from a known one.
		{"invalid body without key", "POST", "/v1/sessions", "", `{"limits":{"memory_bytes":1}}`, http.StatusUnauthorized},
		{"unknown route without key", "GET", "/v2/secret", "", "", http.StatusUnauthorized},
		{"healthz is public", "GET", "/healthz", "", "", http.StatusOK},
		{"spec is public", "GET", "/openapi.yaml", "", "", http.StatusOK},
		{"metrics need a key", "GET", "/metrics", "", "", http.StatusUnauthorized},
		{"metrics with a key", "GET", "/metrics", "Bearer " + keyA, "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(tt.method, tt.target, tt.body)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp := h.send(req, "")
			if resp.status != tt.want {
				t.Fatalf("got %d %s, want %d", resp.status, resp.body, tt.want)
			}
			if tt.want != http.StatusUnauthorized {
				return
			}
			if got := resp.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate: got %q, want Bearer", got)
			}
			code, msg := resp.errorMessage()
			if code != "unauthorized" || msg != "missing or invalid API key: send Authorization: Bearer <key>" {
				t.Errorf("error: got %q %q", code, msg)
			}
		})
	}
	if strings.Contains(h.logs.String(), keyA) || strings.Contains(h.logs.String(), keyA[:5]+"\"") {
		t.Errorf("a key appears in the log:\n%s", h.logs.String())
	}
}

func TestTenancy(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	tests := []struct {
		method, target, body string
	}{
		{"GET", "/v1/sessions/" + id, ""},
		{"DELETE", "/v1/sessions/" + id, ""},
		{"POST", "/v1/sessions/" + id + "/exec", `{"command":["true"]}`},
		{"POST", "/v1/sessions/" + id + "/exec/stream", `{"command":["true"]}`},
		{"GET", "/v1/sessions/" + id + "/files/list", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			resp := h.do(tt.method, tt.target, keyB, tt.body)
			code, msg := resp.errorMessage()
			if resp.status != http.StatusNotFound || code != "not_found" || msg != "session not found" {
				t.Fatalf("key B on key A's session: got %d %s, want 404 session not found", resp.status, resp.body)
			}
		})
	}
	if resp := h.do("GET", "/v1/sessions", keyB, ""); string(resp.body) != "{\"sessions\":[]}\n" {
		t.Errorf("key B's list: got %s, want no sessions", resp.body)
	}
	if resp := h.do("GET", "/v1/sessions/"+id, keyA, ""); resp.status != http.StatusOK {
		t.Errorf("key A's own session: got %d %s", resp.status, resp.body)
	}
	if resp := h.do("DELETE", "/v1/sessions/"+id, keyA, ""); resp.status != http.StatusNoContent {
		t.Errorf("key A deleting its session: got %d %s", resp.status, resp.body)
	}
}

func TestAnonymous(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Keys, c.AllowAnonymous = nil, true })
	id := h.create("")
	if resp := h.do("GET", "/v1/sessions/"+id, "", ""); resp.status != http.StatusOK {
		t.Fatalf("anonymous get: got %d %s", resp.status, resp.body)
	}
}

func TestOwnerIsStableAndNotTheKey(t *testing.T) {
	a1, a2, b := ownerOf(keyA), ownerOf(keyA), ownerOf(keyB)
	if a1 != a2 || a1 == b || len(a1) != 16 || strings.Contains(keyA, a1) {
		t.Fatalf("owners: %q %q %q", a1, a2, b)
	}
}

func newRequest(method, target, body string) *http.Request {
	req, err := http.NewRequest(method, "http://warden.test"+target, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func TestTenants(t *testing.T) {
	tests := []struct {
		keys []string
		want int
	}{
		{nil, 0},
		{[]string{"a"}, 1},
		{[]string{"a", "b", "a"}, 2},
	}
	for _, tt := range tests {
		if got := Tenants(tt.keys); got != tt.want {
			t.Errorf("Tenants(%q) = %d, want %d", tt.keys, got, tt.want)
		}
	}
}

// TestConnectionOwners: the operator protects connections as a tenant
// does, so it is counted when there are metrics keys (Tenants alone, what
// warden serve passed before, left it out).
func TestConnectionOwners(t *testing.T) {
	tests := []struct {
		keys, metricsKeys []string
		want              int
	}{
		{nil, nil, 0},
		{[]string{"a", "b"}, nil, 2},
		{[]string{"a", "b", "a"}, []string{"op"}, 3},
		{[]string{"a"}, []string{"op", "op2"}, 2},
	}
	for _, tt := range tests {
		if got := ConnectionOwners(tt.keys, tt.metricsKeys); got != tt.want {
			t.Errorf("ConnectionOwners(%q, %q) = %d, want %d", tt.keys, tt.metricsKeys, got, tt.want)
		}
	}
}
