package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

func TestListTemplates(t *testing.T) {
	created := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	store := fakeTemplates{infos: []sandbox.TemplateInfo{
		{Name: "pandas", Digest: "sha256:abc", Size: 1234, Created: created, Languages: []string{"bash", "cobol", "python"}},
	}}
	onlyA := store
	onlyA.only = map[string]string{"pandas": ownerOf(keyA)}
	host := interp.KnownOf(interp.Available(""))
	tests := []struct {
		name  string
		store sandbox.Templates
		key   string
		want  []templateJSON
	}{
		{"no store: host only", nil, keyA, []templateJSON{{Name: "host", Languages: host}}},
		{"store, key A", store, keyA, []templateJSON{{Name: "host", Languages: host},
			{Name: "pandas", Digest: "sha256:abc", SizeBytes: ptr(int64(1234)), CreatedAt: &created, Languages: []string{"bash", "python"}}}},
		{"store, key B sees the same", store, keyB, []templateJSON{{Name: "host", Languages: host},
			{Name: "pandas", Digest: "sha256:abc", SizeBytes: ptr(int64(1234)), CreatedAt: &created, Languages: []string{"bash", "python"}}}},
		{"key A's own template", onlyA, keyA, []templateJSON{{Name: "host", Languages: host},
			{Name: "pandas", Digest: "sha256:abc", SizeBytes: ptr(int64(1234)), CreatedAt: &created, Languages: []string{"bash", "python"}}}},
		{"key A's own template, to key B", onlyA, keyB, []templateJSON{{Name: "host", Languages: host}}},
		{"a stored host is not listed twice", fakeTemplates{infos: []sandbox.TemplateInfo{{Name: "host"}}}, keyA,
			[]templateJSON{{Name: "host", Languages: host}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Templates = tt.store })
			resp := h.do("GET", "/v1/templates", tt.key, "")
			if resp.status != http.StatusOK {
				t.Fatalf("got %d %s, want 200", resp.status, resp.body)
			}
			var got templateListJSON
			if err := json.Unmarshal(resp.body, &got); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)      // the comparison's own encoding cannot fail
			wantJSON, _ := json.Marshal(tt.want) // of values built here
			if string(gotJSON) != string(`{"templates":`+string(wantJSON)+`}`) {
				t.Errorf("got %s, want templates %s", gotJSON, wantJSON)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestListTemplatesRefusals(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Templates = fakeTemplates{err: errors.New("store unreadable")} })
	tests := []struct {
		method, key string
		status      int
	}{
		{"GET", "", http.StatusUnauthorized},
		{"GET", keyA, http.StatusInternalServerError},
		{"POST", keyA, http.StatusNotFound},
		{"DELETE", keyA, http.StatusNotFound},
	}
	for _, tt := range tests {
		resp := h.do(tt.method, "/v1/templates", tt.key, "")
		if resp.status != tt.status {
			t.Errorf("%s /v1/templates key %q: got %d %s, want %d", tt.method, tt.key, resp.status, resp.body, tt.status)
		}
	}
}

func TestTemplateOnCreateAndRun(t *testing.T) {
	tests := []struct {
		name, path, body string
		status           int
		template, msg    string
	}{
		{"create, default", "/v1/sessions", `{}`, http.StatusCreated, "", ""},
		{"create, host", "/v1/sessions", `{"template":"host"}`, http.StatusCreated, "host", ""},
		{"create, stored", "/v1/sessions", `{"template":"pandas"}`, http.StatusCreated, "pandas", ""},
		{"create, unknown", "/v1/sessions", `{"template":"nope"}`, http.StatusBadRequest, "nope", `no template "nope"`},
		{"create, bad name", "/v1/sessions", `{"template":"../etc"}`, http.StatusBadRequest, "", "template"},
		{"run, stored", "/v1/run", `{"command":["true"],"template":"pandas"}`, http.StatusOK, "pandas", ""},
		{"run, unknown", "/v1/run", `{"command":["true"],"template":"nope"}`, http.StatusBadRequest, "nope", `no template "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			resp := h.do("POST", tt.path, keyA, tt.body)
			if resp.status != tt.status {
				t.Fatalf("got %d %s, want %d", resp.status, resp.body, tt.status)
			}
			if tt.status >= 400 {
				if _, msg := resp.errorMessage(); !strings.Contains(msg, tt.msg) || strings.Contains(msg, "\n") {
					t.Errorf("message %q: want one line containing %q", msg, tt.msg)
				}
			}
			if tt.template != "" && h.fake.lastOptions.Template != tt.template {
				t.Errorf("SessionOptions.Template: got %q, want %q", h.fake.lastOptions.Template, tt.template)
			}
			if tt.status == http.StatusCreated {
				var s sessionJSON
				if err := json.Unmarshal(resp.body, &s); err != nil {
					t.Fatal(err)
				}
				want := sandbox.TemplateName(tt.template)
				if s.Template != want {
					t.Errorf("session's template: got %q, want %q", s.Template, want)
				}
			}
		})
	}
}
