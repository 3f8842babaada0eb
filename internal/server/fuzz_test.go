package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequestBody sends arbitrary bodies to the routes that decode JSON:
// every answer must be a success or a client error with one line of
// message, never a 500 (a panic recovered, a check missed) and never a
// hang.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"limits":{"memory_bytes":1}}`, `{"command":["true"]}`, `{"language":"python","code":"1"}`,
		`[`, `{"command":[0,0,0]}`, `{"env":{"A":"b","1":"x"}}`, `{"network":{"mode":"proxy","allow":["a.test"]}}`,
		`{"limits":{"cpus":1e308}}`, `null`, `"x"`, `{"a":{"b":{"c":{"d":[[[[]]]]}}}}`, "{\"command\":[\"\\u0000\"]}",
	} {
		f.Add(s)
	}
	fake := newFake(f.TempDir())
	f.Cleanup(func() { _ = fake.closeDirs() })
	srv, err := New(fake, Config{Keys: []string{keyA}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	routes := []string{"/v1/sessions", "/v1/run", "/v1/sessions/ses_0000000000000000000001/exec", "/v1/sessions/ses_0000000000000000000001/network"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, route := range routes {
			method := http.MethodPost
			if strings.HasSuffix(route, "/network") {
				method = http.MethodPut
			}
			req := httptest.NewRequest(method, route, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+keyA)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s with %q = %d %s", method, route, body, rec.Code, rec.Body)
			}
			if rec.Code >= 400 && strings.Count(strings.TrimSpace(rec.Body.String()), "\n") > 0 {
				t.Errorf("%s %s with %q: the error is several lines: %s", method, route, body, rec.Body)
			}
		}
	})
}
