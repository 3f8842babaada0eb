package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	apispec "github.com/warden-sandbox/warden/api"
	"github.com/warden-sandbox/warden/internal/testhost"
)

const (
	keyA = "key-a-0123456789"
	keyB = "key-b-0123456789"
)

// harness is a Server over a fakeSessions, driven in process. Every
// answer it sees is checked against the spec's declared responses.
type harness struct {
	t    *testing.T
	srv  *Server
	fake *fakeSessions
	logs *syncBuffer
}

// syncBuffer collects output written from other goroutines.
type syncBuffer = testhost.SyncBuffer

func newHarness(t *testing.T, configure func(*Config)) *harness {
	t.Helper()
	fake := newFake(t.TempDir())
	t.Cleanup(func() {
		if err := fake.closeDirs(); err != nil {
			t.Errorf("closing workspaces: %v", err)
		}
	})
	logs := &syncBuffer{}
	cfg := Config{
		Keys:   []string{keyA, keyB},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(fake, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, srv: srv, fake: fake, logs: logs}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// errorMessage is the one-line message of an error answer ("" if the
// body is not the API's error shape).
func (r response) errorMessage() (code, message string) {
	var e errorBody
	if json.Unmarshal(r.body, &e) != nil {
		return "", ""
	}
	return e.Error.Code, e.Error.Message
}

// do sends a request with key (none if empty) and a JSON body (none if
// empty).
func (h *harness) do(method, target, key, body string) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return h.send(req, key)
}

func (h *harness) send(req *http.Request, key string) response {
	h.t.Helper()
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	h.checkResponse(req, rec)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// specRoutes maps each ServeMux pattern to its operation in a spec loaded
// by kin-openapi, an implementation independent of the server's own
// validator, to check answers with. kin-openapi is a test dependency only:
// linked into warden, its package init slowed every sandbox start.
var specRoutes = sync.OnceValues(func() (map[string]*routers.Route, error) {
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPIYAML)
	if err != nil {
		return nil, err
	}
	routes := map[string]*routers.Route{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			routes[method+" "+path] = &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: op,
			}
		}
	}
	return routes, nil
})

// checkResponse fails the test when an answer's status or JSON body is
// not one the spec declares for the operation.
func (h *harness) checkResponse(req *http.Request, rec *httptest.ResponseRecorder) {
	h.t.Helper()
	routes, err := specRoutes()
	if err != nil {
		h.t.Fatalf("loading the spec: %v", err)
	}
	_, pattern := h.srv.mux.Handler(req)
	route := routes[pattern]
	if route == nil {
		return
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true}
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams(route.Path, req.URL.EscapedPath()),
			Route:      route,
		},
		Status:  rec.Code,
		Header:  rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: opts,
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		h.t.Errorf("%s %s answered %d %s, which the spec does not allow: %s",
			req.Method, req.URL, rec.Code, rec.Body.Bytes(), oneLine(err))
	}
}

// create makes a session for key and returns its id.
func (h *harness) create(key string) string {
	h.t.Helper()
	resp := h.do("POST", "/v1/sessions", key, "{}")
	if resp.status != http.StatusCreated {
		h.t.Fatalf("create: got %d %s, want 201", resp.status, resp.body)
	}
	var s sessionJSON
	if err := json.Unmarshal(resp.body, &s); err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return s.ID
}

// healthy fails the test unless the server still answers /healthz.
func (h *harness) healthy() {
	h.t.Helper()
	if resp := h.do("GET", "/healthz", "", ""); resp.status != http.StatusOK {
		h.t.Fatalf("healthz after the test: got %d %s", resp.status, resp.body)
	}
}
