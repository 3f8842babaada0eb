package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKeyAuthenticator: a Front's keys are the server's: each key is its
// tenant, a metrics key and an unknown key are refused, and a server
// without keys takes any key as the one anonymous owner.
func TestKeyAuthenticator(t *testing.T) {
	keyed := Config{Keys: []string{keyA, keyB}, MetricsKeys: []string{"metrics-key-0123"}}
	tests := []struct {
		name  string
		cfg   Config
		key   string
		owner string
		fails bool
	}{
		{"first key", keyed, keyA, ownerOf(keyA), false},
		{"second key", keyed, keyB, ownerOf(keyB), false},
		{"unknown key", keyed, "key-c-0123456789", "", true},
		{"empty key", keyed, "", "", true},
		{"metrics key", keyed, "metrics-key-0123", "", true},
		{"anonymous", Config{AllowAnonymous: true}, "anything", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth, err := KeyAuthenticator(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			owner, err := auth(httptest.NewRequest("GET", "/", nil), tt.key)
			if (err != nil) != tt.fails || owner != tt.owner {
				t.Errorf("= %q, %v; want %q, failing %v", owner, err, tt.owner, tt.fails)
			}
			if tt.key == "key-c-0123456789" && !errors.Is(err, ErrBadKey) {
				t.Errorf("unknown key: %v, want ErrBadKey", err)
			}
		})
	}
	if _, err := KeyAuthenticator(Config{}); err == nil {
		t.Error("KeyAuthenticator without keys or AllowAnonymous succeeded, want the server's own refusal")
	}
}

// TestFront: a Front serves its own requests inside the server's logging
// and panic recovery (its route and tenant logged, as Admit said) and
// before Warden's authentication, and passes the rest to the API.
func TestFront(t *testing.T) {
	front := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/front/ok":
				Admit(r, "tenant-x", "FRONT ok")
				w.WriteHeader(http.StatusAccepted)
			case "/front/panic":
				panic("front broke")
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
	h := newHarness(t, func(c *Config) { c.Front = front })
	if r := h.do("GET", "/front/ok", "", ""); r.status != http.StatusAccepted {
		t.Errorf("front's own route without Warden's key = %d, want 202 (the front authenticates its own)", r.status)
	}
	if r := h.do("GET", "/front/panic", "", ""); r.status != http.StatusInternalServerError {
		t.Errorf("a panicking front = %d, want 500 from the server's recovery", r.status)
	}
	if r := h.do("GET", "/v1/sessions", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("the API without a key through a front = %d, want 401", r.status)
	}
	if r := h.do("GET", "/v1/sessions", keyA, ""); r.status != http.StatusOK {
		t.Errorf("the API with a key through a front = %d, want 200", r.status)
	}
	logs := h.logs.String()
	for _, want := range []string{`route="FRONT ok" status=202 duration=`, "owner=tenant-x", `msg="handler panicked"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}
