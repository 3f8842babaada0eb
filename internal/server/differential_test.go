package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// sessionID is a well-formed session id for each path that takes one,
// so only the bodies differ between the two validators.
const sessionID = "ses_0000000000000000000001"

// jsonBodyRoutes are the operations of the spec that take a JSON body,
// from the server's own reading of it, keyed by mux pattern, with a path
// that matches each.
func jsonBodyRoutes(s *Server) (map[string]string, error) {
	routes := map[string]string{}
	for pattern, op := range s.operations {
		if op.body == nil || op.body.upload {
			continue
		}
		path := strings.ReplaceAll(op.path, "{id}", sessionID)
		if strings.Contains(path, "{") {
			return nil, fmt.Errorf("%s: give its path parameters values in jsonBodyRoutes", pattern)
		}
		routes[pattern] = path
	}
	if len(routes) < 5 {
		return nil, fmt.Errorf("found %d operations with a JSON body, want at least 5: %v", len(routes), routes)
	}
	return routes, nil
}

// deliberateDifference is a body our validator refuses and kin-openapi
// accepts on purpose: a bound the server enforces beyond the schema. It
// is given our error message. The pre-scan of a body's shape
// (shape.go) needs no entry: it is derived from the schemas so as never to
// refuse a body one of them matches.
type deliberateDifference struct {
	reason string
	match  func(ours string) bool
}

// deliberateDifferences are every case where the two may disagree, each
// with why. Anything else is a bug in our validator or in the spec.
var deliberateDifferences = []deliberateDifference{
	{"a body is bounded in bytes (Config.MaxBodyBytes, 8 MiB by default) beyond the schema's bounds in characters: 4 Mi characters of code may take more",
		func(ours string) bool { return strings.Contains(ours, "request body is larger than") }},
	{"a body is one JSON value: kin-openapi decodes the first and ignores what follows, which a client never means to send",
		func(ours string) bool { return strings.Contains(ours, "more data after its JSON value") }},
}

// validatorSeeds are valid bodies and near misses of each request schema:
// a bound just inside and just outside, a wrong type, an unknown field.
var validatorSeeds = []string{
	`{}`, ``, ` `, `null`, `[]`, `"x"`, `1`, `{`, `{}{}`, `{} x`,
	`{"command":["python3","-c","print(1)"]}`, `{"command":[]}`, `{"command":[""]}`, `{"command":"ls"}`, `{"command":[1]}`,
	`{"language":"python","code":"1+1"}`, `{"language":"cobol","code":"x"}`, `{"language":"python","code":""}`,
	`{"stdin":"abc","env":{"A":"b"},"cwd":"/tmp","timeout_seconds":1.5}`, `{"cwd":""}`, `{"timeout_seconds":0}`,
	`{"timeout_seconds":0.001}`, `{"timeout_seconds":86400}`, `{"timeout_seconds":86400.5}`, `{"timeout_seconds":"1"}`,
	`{"env":{"A":1}}`, `{"env":[]}`, `{"env":null}`, `{"no_such":1}`,
	`{"limits":{"memory_bytes":4194304,"pids":1,"cpus":0.01,"disk_bytes":1048576}}`, `{"limits":{"memory_bytes":4194303}}`,
	`{"limits":{"memory_bytes":68719476737}}`, `{"limits":{"memory_bytes":1.5e7}}`, `{"limits":{"memory_bytes":4194304.5}}`,
	`{"limits":{"pids":1e400}}`, `{"limits":{"pids":-0}}`, `{"limits":{"cpus":1024}}`, `{"limits":{"cpus":1024.0001}}`,
	`{"limits":{"open_files":15}}`, `{"limits":{"timeout_seconds":0.0009}}`, `{"limits":{"x":1}}`, `{"limits":null}`,
	`{"network":{"mode":"proxy","allow":["a.test"],"deny":["b.test"]}}`, `{"network":{"mode":"all"}}`, `{"network":{"allow":[1]}}`,
	`{"allow":["a.test"],"deny":[]}`, `{"allow":null}`, `{"mode":"none"}`,
	`{"ttl_seconds":1,"idle_timeout_seconds":86400}`, `{"ttl_seconds":0.5}`, `{"idle_timeout_seconds":true}`,
	`{"a":{"b":{"c":{"d":[[[[]]]]}}}}`, "{\"command\":[\"\\u0000\"]}", `{"command":["\ud800"]}`,
	`{"limits":{"memory_bytes":4194304.0}}`, `{"limits":{"pids":1e0}}`, `{"limits":{"pids":1E+3}}`, `{"limits":{"memory_bytes":9223372036854775808}}`,
	`{"limits":{"memory_bytes":-9223372036854775809}}`, `{"limits":{"cpus":-0.0}}`, `{"limits":{"cpus":0.01000000000000000001}}`,
	"{\"cwd\":\"\xff\xfe\"}", `{"cwd":"a\u0000b"}`, `{"command":["a"],"command":[]}`, `{"env":{"":"x"}}`,
}

// boundarySeeds are bodies at each length and count bound of the request
// schemas, and one past it.
func boundarySeeds() []string {
	str := func(n int) string { return strconv.Quote(strings.Repeat("é", n)) }
	list := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	env := func(n int) string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf("%q:\"v\"", fmt.Sprintf("K%d", i)))
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	var seeds []string
	for _, n := range []int{0, 1} {
		seeds = append(seeds,
			`{"cwd":`+str(4096+n)+`}`,
			`{"command":[`+str(131072+n)+`]}`,
			`{"command":`+list(4096+n, `"a"`)+`}`,
			`{"allow":`+list(256+n, `"a.test"`)+`}`,
			`{"network":{"deny":[`+str(261+n)+`]}}`,
			`{"env":`+env(256+n)+`}`,
			`{"env":{"A":`+str(131072+n)+`}}`,
		)
	}
	return seeds
}

// FuzzValidatorMatchesOpenAPI feeds the same body to the server's own
// request validator and to kin-openapi's, an independent reading of
// api/openapi.yaml, for every operation that takes a JSON body: the two
// must agree on what is valid, but for the deliberate differences listed
// above.
func FuzzValidatorMatchesOpenAPI(f *testing.F) {
	for _, s := range append(validatorSeeds, boundarySeeds()...) {
		f.Add(s)
	}
	srv, err := New(newFake(f.TempDir()), Config{Keys: []string{keyA}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	routes, err := specRoutes()
	if err != nil {
		f.Fatalf("loading the spec: %v", err)
	}
	bodies, err := jsonBodyRoutes(srv)
	if err != nil {
		f.Fatal(err)
	}
	for pattern := range bodies {
		if routes[pattern] == nil {
			f.Fatalf("kin-openapi finds no operation %s in the spec", pattern)
		}
	}
	f.Fuzz(func(t *testing.T, payload string) {
		for pattern, path := range bodies {
			ours := oursValidate(srv, pattern, path, payload)
			theirs := kinValidate(routes[pattern], path, payload)
			if (ours == nil) == (theirs == nil) {
				continue
			}
			if ours != nil && deliberate(ours.Error()) {
				continue
			}
			t.Errorf("%s with %.300q: ours = %.300v, kin-openapi = %.300v", pattern, payload, ours, theirs)
		}
	})
}

// request is a JSON request to path with payload, as a client sends it.
func request(pattern, path, payload string) *http.Request {
	method, _, _ := strings.Cut(pattern, " ")
	req := httptest.NewRequest(method, path, strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// oursValidate runs the server's validation of a request, as
// withValidation does, without authentication or a handler.
func oursValidate(s *Server, pattern, path, payload string) error {
	b := &body{charge: charge{budget: s.bodies, owner: keyA}}
	b.release = sync.OnceFunc(b.charge.release)
	defer b.release()
	return s.check(httptest.NewRecorder(), request(pattern, path, payload), pattern, b)
}

// kinValidate runs kin-openapi's validation of the same request.
func kinValidate(route *routers.Route, path, payload string) error {
	params := map[string]string{}
	if rest, ok := strings.CutPrefix(path, "/v1/sessions/"); ok {
		params["id"], _, _ = strings.Cut(rest, "/")
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    request(route.Method+" "+route.Path, path, payload),
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	return openapi3filter.ValidateRequest(context.Background(), in)
}

// deliberate says whether our refusal, ours, is a listed difference.
func deliberate(ours string) bool {
	for _, d := range deliberateDifferences {
		if d.match(ours) {
			return true
		}
	}
	return false
}
