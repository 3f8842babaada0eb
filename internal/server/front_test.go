package server

import (
	"errors"
	"io"
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
			case "/front/flush":
				f, ok := w.(http.Flusher)
				if !ok {
					w.WriteHeader(http.StatusNotImplemented)
					return
				}
				f.Flush()
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
	flushed := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(flushed, httptest.NewRequest("GET", "/front/flush", nil))
	if flushed.Code != http.StatusOK || !flushed.Flushed {
		t.Errorf("a front's stream = %d, flushed %v; want 200, flushed (its writer is an http.Flusher)", flushed.Code, flushed.Flushed)
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

// TestHoldBody: a Front's body is read within its limit and charged to
// its owner's share until released; a body over the limit is a 413 that
// says its status.
func TestHoldBody(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name   string
		body   string
		limit  int64
		status int
	}{
		{"fits", `{"a":1}`, 64, 0},
		{"empty", ``, 64, 0},
		{"over the limit", strings.Repeat("x", 65), 64, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/front", strings.NewReader(tt.body))
			w := httptest.NewRecorder()
			buf, release, err := h.srv.HoldBody(w, r, "o", tt.limit)
			var st interface{ HTTPStatus() int }
			switch {
			case tt.status != 0 && (!errors.As(err, &st) || st.HTTPStatus() != tt.status):
				t.Fatalf("= %v, want an error with status %d", err, tt.status)
			case tt.status == 0 && (err != nil || string(buf) != tt.body):
				t.Fatalf("= %q, %v; want the body", buf, err)
			}
			if tt.status == 0 && len(tt.body) > 0 && h.srv.bodies.heldBy("o") == 0 {
				t.Error("the held body is not charged to its owner")
			}
			release()
			if n := h.srv.bodies.heldBy("o"); n != 0 {
				t.Errorf("after release %d bytes still held", n)
			}
		})
	}
}

// TestPaceBody: a Front's streamed body is paced (its deadline moves on
// as it arrives) and still reads whole; a request without a body is left
// alone.
func TestPaceBody(t *testing.T) {
	h := newHarness(t, nil)
	r := httptest.NewRequest("POST", "/front", strings.NewReader("upload"))
	h.srv.PaceBody(httptest.NewRecorder(), r, 1<<20)
	if _, ok := r.Body.(*pacedBody); !ok {
		t.Fatalf("body is a %T, want a *pacedBody", r.Body)
	}
	if b, err := io.ReadAll(r.Body); err != nil || string(b) != "upload" {
		t.Errorf("paced body read %q, %v; want upload", b, err)
	}
	empty := httptest.NewRequest("GET", "/front", nil)
	h.srv.PaceBody(httptest.NewRecorder(), empty, 1<<20)
	if empty.Body != http.NoBody {
		t.Errorf("a request without a body got %T", empty.Body)
	}
}
