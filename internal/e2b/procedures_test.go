package e2b

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestKnownProcedures: a known procedure reaches the service; any other
// path, however hostile (control bytes, bad UTF-8, quotes, a long name),
// answers valid JSON in Connect's error shape that names the service and
// lists every procedure by its short name.
func TestKnownProcedures(t *testing.T) {
	procs := []string{"/svc.Svc/A", "/svc.Svc/B", "/svc.Svc/C"}
	h := knownProcedures("svc.Svc", procs, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) }))
	tests := []struct{ name, path string }{
		{"unknown", "/svc.Svc/Nope"},
		{"control byte", "/svc.Svc/\x01"},
		{"bad UTF-8", "/svc.Svc/\xff\xfe"},
		{"quotes", `/svc.Svc/"},"x":"`},
		{"long", "/svc.Svc/" + strings.Repeat("a", 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/svc.Svc/A", nil)
			r.URL.Path = tt.path
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var body struct{ Code, Message string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || !utf8.Valid(w.Body.Bytes()) {
				t.Fatalf("body %q is not valid JSON: %v", w.Body, err)
			}
			if w.Code != http.StatusNotFound || body.Code != "unimplemented" {
				t.Errorf("answer %d %q, want 404 unimplemented", w.Code, body.Code)
			}
			if want := "is not a procedure of svc.Svc: use A, B or C"; !strings.Contains(body.Message, want) || len(body.Message) > 200 {
				t.Errorf("message %q, want at most 200 bytes containing %q", body.Message, want)
			}
		})
	}
	r := httptest.NewRequest("POST", "/svc.Svc/B", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 299 {
		t.Errorf("a known procedure answered %d, want the service's 299", w.Code)
	}
}
