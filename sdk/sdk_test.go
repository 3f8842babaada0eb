package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/go-cmp/cmp"

	"github.com/warden-sandbox/warden/api"
)

const (
	testKey = "test-key"
	testID  = "ses_AAAAAAAAAAAAAAAAAAAAAAAA"
)

// specRouter loads api/openapi.yaml once, so the fake server can check
// that every request the SDK sends is one the spec (and so the real
// server's validator) accepts.
var specRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("loading spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validating spec: %w", err)
	}
	doc.Servers = nil // match the test server's address
	return legacy.NewRouter(doc)
})

// fakeServer serves handlers keyed by "METHOD /path" after checking the
// bearer token and validating the request against the spec; it records
// the raw query of each request for the tests to inspect.
type fakeServer struct {
	t        *testing.T
	handlers map[string]http.HandlerFunc
	queries  []string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		writeJSON(w, http.StatusUnauthorized, ErrorResponse{Error: ErrorDetail{Code: ErrorCodeUnauthorized, Message: "bad key " + got}})
		return
	}
	router, err := specRouter()
	if err != nil {
		f.t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	route, pathParams, err := router.FindRoute(r)
	if err != nil {
		f.t.Errorf("%s %s: no route in the spec: %v", r.Method, r.URL, err)
		http.Error(w, "no route", http.StatusNotFound)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		f.t.Errorf("%s %s: request does not match the spec: %v", r.Method, r.URL, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.queries = append(f.queries, r.URL.RawQuery)
	h, ok := f.handlers[r.Method+" "+r.URL.Path]
	if !ok {
		writeJSON(w, http.StatusNotFound, ErrorResponse{Error: ErrorDetail{Code: ErrorCodeNotFound, Message: "no handler"}})
		return
	}
	h(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// newFake starts a fake API with the handlers and a client for it.
func newFake(t *testing.T, handlers map[string]http.HandlerFunc) (*Client, *fakeServer) {
	t.Helper()
	f := &fakeServer{t: t, handlers: handlers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

func decodeBody[T any](t *testing.T, r *http.Request) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
		t.Errorf("decoding request body: %v", err)
	}
	return v
}

const sessionPath = "/v1/sessions/" + testID

func TestSessionHappyPath(t *testing.T) {
	ctx := context.Background()
	var uploaded []byte
	info := SessionInfo{ID: testID, State: SessionStateReady, Limits: Limits{MemoryBytes: 256 << 20}}
	c, f := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/sessions": func(w http.ResponseWriter, r *http.Request) {
			got := decodeBody[SessionCreate](t, r)
			if got.Limits.MemoryBytes != 256<<20 || got.TTLSeconds != 60 {
				t.Errorf("create body = %+v", got)
			}
			writeJSON(w, http.StatusCreated, info)
		},
		"GET /v1/sessions": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, SessionList{Sessions: []SessionInfo{info}})
		},
		"POST " + sessionPath + "/exec": func(w http.ResponseWriter, r *http.Request) {
			req := decodeBody[ExecRequest](t, r)
			if req.Language == LanguagePython {
				writeJSON(w, http.StatusOK, Result{Value: "42"})
				return
			}
			writeJSON(w, http.StatusOK, Result{Stdout: strings.Join(req.Command, " ") + "\n"})
		},
		"PUT " + sessionPath + "/files": func(w http.ResponseWriter, r *http.Request) {
			uploaded, _ = io.ReadAll(r.Body)
			writeJSON(w, http.StatusCreated, FileEntry{Name: "run.sh", Path: "/workspace/run.sh", Type: FileTypeFile, Mode: r.URL.Query().Get("mode")})
		},
		"GET " + sessionPath + "/files": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(uploaded)
		},
		"GET " + sessionPath + "/files/list": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, FileList{Path: "/workspace", Entries: []FileEntry{{Name: "run.sh"}}})
		},
		"POST " + sessionPath + "/files/mkdir": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusCreated, FileEntry{Name: "out", Type: FileTypeDir})
		},
		"DELETE " + sessionPath + "/files": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		},
		"DELETE " + sessionPath: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		},
	})

	s, err := c.NewSession(ctx, &SessionCreate{Limits: Limits{MemoryBytes: 256 << 20}, TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != testID {
		t.Errorf("ID() = %q, want %q", s.ID(), testID)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != testID {
		t.Errorf("Sessions() = %+v, %v", list, err)
	}
	if res, err := s.RunCode(ctx, LanguagePython, "x = 21\nx * 2"); err != nil || res.Value != "42" {
		t.Errorf("RunCode() = %+v, %v", res, err)
	}
	if res, err := s.Run(ctx, "echo", "hi"); err != nil || res.Stdout != "echo hi\n" {
		t.Errorf("Run() = %+v, %v", res, err)
	}
	ent, err := s.WriteFile(ctx, "run.sh", strings.NewReader("#!/bin/sh\n"), 0o755)
	if err != nil || ent.Mode != "0755" {
		t.Errorf("WriteFile() = %+v, %v", ent, err)
	}
	if b, err := s.ReadFile(ctx, "run.sh"); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("ReadFile() = %q, %v", b, err)
	}
	if l, err := s.ListFiles(ctx, "."); err != nil || len(l.Entries) != 1 {
		t.Errorf("ListFiles() = %+v, %v", l, err)
	}
	if _, err := s.ListFiles(ctx, ""); err != nil {
		t.Errorf("ListFiles(\"\") = %v", err)
	}
	if _, err := s.WriteFile(ctx, "plain.txt", strings.NewReader("x"), 0); err != nil {
		t.Errorf("WriteFile(mode 0) = %v", err)
	}
	if e, err := s.Mkdir(ctx, "out/plots"); err != nil || e.Type != FileTypeDir {
		t.Errorf("Mkdir() = %+v, %v", e, err)
	}
	if err := s.Remove(ctx, "run.sh"); err != nil {
		t.Errorf("Remove() = %v", err)
	}
	if err := s.RemoveAll(ctx, "out"); err != nil {
		t.Errorf("RemoveAll() = %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close() = %v", err)
	}
	wantQueries := []string{"", "", "", "", "path=run.sh&mode=0755", "path=run.sh", "path=.", "path=.", "path=plain.txt", "path=out%2Fplots", "path=run.sh&recursive=false", "path=out&recursive=true", ""}
	if diff := cmp.Diff(wantQueries, f.queries); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}

func TestClientRun(t *testing.T) {
	c, _ := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/run": func(w http.ResponseWriter, r *http.Request) {
			req := decodeBody[RunRequest](t, r)
			if req.Network.Mode != NetworkModeNone || req.Limits.TimeoutSeconds != 5 {
				t.Errorf("run body = %+v", req)
			}
			writeJSON(w, http.StatusOK, Result{ExitCode: 124, TimedOut: true})
		},
	})
	res, err := c.Run(context.Background(), RunRequest{Command: []string{"sleep", "10"},
		Limits: Limits{TimeoutSeconds: 5}, Network: Network{Mode: NetworkModeNone}})
	if err != nil || !res.TimedOut || res.ExitCode != 124 {
		t.Errorf("Run() = %+v, %v", res, err)
	}
}

func TestAPIErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := newFake(t, map[string]http.HandlerFunc{
		"GET " + sessionPath: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusNotFound, ErrorResponse{Error: ErrorDetail{Code: ErrorCodeNotFound, Message: "session " + testID + " not found"}})
		},
		"POST " + sessionPath + "/exec": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusConflict, ErrorResponse{Error: ErrorDetail{Code: ErrorCodeConflict, Message: "session is busy"}})
		},
		"POST /v1/sessions": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>upstream down</html>\n")
		},
		"DELETE " + sessionPath: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusNotFound, ErrorResponse{Error: ErrorDetail{Code: ErrorCodeNotFound, Message: "gone"}})
		},
	})
	s := c.Session(testID)

	_, err := s.Info(ctx)
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("Info() error = %v (%T), want *APIError", err, err)
	}
	want := &APIError{StatusCode: http.StatusNotFound, Code: ErrorCodeNotFound, Message: "session " + testID + " not found"}
	if diff := cmp.Diff(want, apiErr); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), "warden: not_found: session "+testID+" not found"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !IsNotFound(err) || !errors.Is(fmt.Errorf("wrapped: %w", err), ErrNotFound) || IsConflict(err) {
		t.Errorf("errors.Is does not match not_found exactly for %v", err)
	}

	if _, err := s.Run(ctx, "true"); !IsConflict(err) {
		t.Errorf("Run() on a busy session = %v, want conflict", err)
	}

	_, err = c.NewSession(ctx, nil)
	if !errors.As(err, &apiErr) || apiErr.Code != "" || apiErr.StatusCode != http.StatusBadGateway {
		t.Fatalf("NewSession() through a broken proxy = %#v", err)
	}
	if got, want := err.Error(), "warden: HTTP 502: <html>upstream down</html>"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	if err := s.Close(ctx); err != nil {
		t.Errorf("Close() of an ended session = %v, want nil", err)
	}

	bad, err := New(c.API().ClientInterface.(*RawClient).Server, WithAPIKey("wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Sessions(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Sessions() with a wrong key = %v, want unauthorized", err)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://host", "http://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) = nil error, want one", u)
		}
	}
}

// ndjson encodes events one per line, as the server streams them.
func ndjson(t *testing.T, events ...Event) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestStream(t *testing.T) {
	ok := ndjson(t,
		Event{Type: EventTypeStdout, Data: "step 1\n"},
		Event{Type: EventTypeStderr, Data: "warning\n"},
		Event{Type: EventTypeStdout, Data: "step 2\n"},
		Event{Type: EventTypeResult, Result: &Result{Stdout: "step 1\nstep 2\n", Stderr: "warning\n"}},
	)
	failed := ndjson(t,
		Event{Type: EventTypeStdout, Data: "partial"},
		Event{Type: EventTypeError, Error: &ErrorDetail{Code: ErrorCodeInternal, Message: "sandbox died"}},
	)
	truncated := ndjson(t, Event{Type: EventTypeStdout, Data: "partial"})

	var body string
	c, _ := newFake(t, map[string]http.HandlerFunc{
		"POST " + sessionPath + "/exec/stream": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			// A blank line must be skipped, not taken for the end.
			_, _ = io.WriteString(w, "\n"+body)
		},
	})
	s := c.Session(testID)
	req := ExecRequest{Command: []string{"make"}}

	t.Run("result", func(t *testing.T) {
		body = ok
		var got []Event
		res, err := s.Stream(context.Background(), req, func(ev Event) error {
			got = append(got, ev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []Event{
			{Type: EventTypeStdout, Data: "step 1\n"},
			{Type: EventTypeStderr, Data: "warning\n"},
			{Type: EventTypeStdout, Data: "step 2\n"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if res.Stdout != "step 1\nstep 2\n" {
			t.Errorf("result stdout = %q", res.Stdout)
		}
	})
	t.Run("error event", func(t *testing.T) {
		body = failed
		_, err := s.Stream(context.Background(), req, nil)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != ErrorCodeInternal || apiErr.Message != "sandbox died" {
			t.Errorf("Stream() = %v, want internal: sandbox died", err)
		}
	})
	t.Run("no final event", func(t *testing.T) {
		body = truncated
		if _, err := s.Stream(context.Background(), req, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Stream() = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("callback stops", func(t *testing.T) {
		body = ok
		stop := errors.New("enough")
		if _, err := s.Stream(context.Background(), req, func(Event) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("Stream() = %v, want the callback's error", err)
		}
	})
}

func TestPNGs(t *testing.T) {
	png1, png2 := []byte("\x89PNG\r\n\x1a\nfirst"), []byte("\x89PNG\r\n\x1a\nsecond")
	res := Result{Outputs: []Output{
		{MimeType: "image/png", Encoding: OutputEncodingBase64, Data: base64.StdEncoding.EncodeToString(png1)},
		{MimeType: "text/html", Encoding: OutputEncodingUTF8, Data: "<table></table>"},
		{MimeType: "image/png", Encoding: OutputEncodingBase64, Data: base64.StdEncoding.EncodeToString(png2)},
	}}
	got, err := res.PNGs()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{png1, png2}, got); diff != "" {
		t.Errorf("PNGs() (-want +got):\n%s", diff)
	}

	bad := Result{Outputs: []Output{{MimeType: "image/png", Encoding: OutputEncodingBase64, Data: "not base64!"}}}
	if _, err := bad.PNGs(); err == nil {
		t.Error("PNGs() of bad base64 = nil error, want one")
	}
}

func TestTemplates(t *testing.T) {
	ctx := context.Background()
	want := []Template{{Name: "host", Languages: []Language{LanguageBash}}, {Name: "pandas", Digest: "sha256:abc", SizeBytes: 9, Languages: []Language{LanguagePython}}}
	c, _ := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/templates": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, TemplateList{Templates: want})
		},
		"POST /v1/sessions": func(w http.ResponseWriter, r *http.Request) {
			if got := decodeBody[SessionCreate](t, r); got.Template != "pandas" {
				t.Errorf("create body's template = %q, want pandas", got.Template)
			}
			writeJSON(w, http.StatusCreated, SessionInfo{ID: testID, State: SessionStateReady, Template: "pandas"})
		},
	})
	got, err := c.Templates(ctx)
	if err != nil || len(got) != 2 || got[1].Name != "pandas" || got[1].Languages[0] != LanguagePython {
		t.Errorf("Templates() = %+v, %v; want %+v", got, err, want)
	}
	if _, err := c.NewSession(ctx, &SessionCreate{Template: "pandas"}); err != nil {
		t.Errorf("NewSession on a template: %v", err)
	}
}
