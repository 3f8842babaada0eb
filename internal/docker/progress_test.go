package docker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tarFailure is what Docker 20.10 streams, after its 200, for an import
// whose tar it cannot read.
const tarFailure = `{"status":"Downloading from http://127.0.0.1:1/x.tar"}
{"status":"Importing","progressDetail":{"current":3000,"total":3000},"progress":"[=>] 3kB/3kB"}
{"errorDetail":{"message":"Error processing tar file(exit status 1): archive/tar: invalid tar header"},"error":"Error processing tar file(exit status 1): archive/tar: invalid tar header"}
`

func TestProgressError(t *testing.T) {
	long := strings.Repeat("x", 2*maxProgressError)
	tests := []struct {
		name, stream, want string // want "" means no error
	}{
		{"done", `{"status":"sha256:0123"}` + "\n", ""},
		{"empty", "", "docker: the engine's import progress ended without the image's id"},
		{"no id at the end", `{"status":"Importing"}` + "\n", "docker: the engine's import progress ended without the image's id"},
		{"id then more", `{"status":"sha256:0123"}{"status":"Importing"}`, "docker: the engine's import progress ended without the image's id"},
		{"failed after progress", tarFailure, "docker: Error processing tar file(exit status 1): archive/tar: invalid tar header"},
		{"error without detail", `{"status":"Importing"}{"error":"no space left on device"}`, "docker: no space left on device"},
		{"detail on many lines", `{"errorDetail":{"message":"line one\nline two\r\n\tthree"}}`, "docker: line one line two three"},
		{"not JSON", `{"status":"Importing"}` + "\nHTTP/1.1 500 oops", "docker: reading the engine's import progress"},
		{"cut short", `{"status":"Import`, "docker: reading the engine's import progress"},
		{"long error", `{"error":"` + long + `"}`, "docker: " + long[:maxProgressError] + "…"},
		{"cut inside a character", `{"error":"` + long[:maxProgressError-1] + `é"}`, "docker: " + long[:maxProgressError-1] + "…"},
	}
	for _, tt := range tests {
		err := progressError([]byte(tt.stream))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || tt.want != "" && (!strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, seeLog)) || strings.Contains(got, "\n") {
			t.Errorf("%s: progressError = %q, want %q ending %q", tt.name, got, tt.want, seeLog)
		}
	}
}

// fakeEngine is an Engine whose every answer is status and body.
func fakeEngine(t *testing.T, status int, body string) *Engine {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+apiVersion+"/images/create" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &Engine{hc: srv.Client(), base: srv.URL + "/" + apiVersion}
}

func TestImportReadsTheStream(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string // "" means no error
	}{
		{"imported", 200, `{"status":"Importing"}` + "\n" + `{"status":"sha256:0123"}` + "\n", ""},
		{"failed inside a 200", 200, tarFailure, "invalid tar header"},
		{"empty 200", 200, "", "ended without the image's id"},
		{"refused", 500, `{"message":"Error processing tar file(exit status 1): unexpected EOF"}`, "unexpected EOF (HTTP 500)"},
		{"endless", 200, strings.Repeat(`{"status":"Importing"}`, maxAnswer/20), "longer than 8 MiB"},
	}
	for _, tt := range tests {
		e := fakeEngine(t, tt.status, tt.body)
		err := e.Import(context.Background(), "warden-root", "0123", strings.NewReader("tar"))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: Import = %q, want an error containing %q", tt.name, got, tt.want)
		}
	}
}

// TestLoadError: an images/load answer is a success only when a message
// names the image loaded; a reported failure is the error, in one line.
func TestLoadError(t *testing.T) {
	tests := []struct{ stream, want string }{
		{`{"stream":"Loaded image: warden-template:x\n"}`, ""},
		{`{"errorDetail":{"message":"invalid diffID for layer 0"},"error":"invalid diffID for layer 0"}`, "invalid diffID for layer 0"},
		{``, "without naming the image loaded"},
		{`not json`, "reading the engine's load progress"},
	}
	for _, tt := range tests {
		err := loadError([]byte(tt.stream))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("loadError(%q) = %v, want %q", tt.stream, err, tt.want)
		}
	}
}
