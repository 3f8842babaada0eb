package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/warden-sandbox/warden/internal/server/apigen"
)

// validator checks requests against the embedded OpenAPI document, so
// every bound the spec promises (types, ranges, patterns, unknown fields)
// is enforced in one place before a handler runs.
type validator struct {
	// routes maps a ServeMux pattern ("GET /v1/sessions/{id}") to its
	// operation; the mux's patterns are the spec's paths, so the route the
	// mux will serve and the operation validated are always the same.
	routes  map[string]*routers.Route
	options *openapi3filter.Options
	// bodyless is the same options without body validation, for uploads,
	// whose body is a stream of bytes the handler bounds itself.
	bodyless *openapi3filter.Options
}

func newValidator() (*validator, error) {
	doc, err := apigen.GetSpec()
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("embedded spec: %w", err)
	}
	v := &validator{
		routes: map[string]*routers.Route{},
		options: &openapi3filter.Options{
			// Defaults are applied from spec.DefaultLimits by the handler;
			// the body the handler decodes is the one the client sent.
			SkipSettingDefaults: true,
		},
	}
	bodyless := *v.options
	bodyless.ExcludeRequestBody = true
	v.bodyless = &bodyless
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			// Authentication has already run. Left to the validator, the
			// security check would also read the whole body into memory
			// (for an authentication function that might want it), which
			// for an upload has no bound.
			checked := *op
			checked.Security = &openapi3.SecurityRequirements{}
			v.routes[method+" "+path] = &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: &checked,
			}
		}
	}
	return v, nil
}

// isUpload says whether an operation takes a raw byte stream rather than
// JSON: its body is neither read into memory nor validated here.
func isUpload(op *openapi3.Operation) bool {
	return op.RequestBody != nil && op.RequestBody.Value != nil &&
		op.RequestBody.Value.Content.Get("application/octet-stream") != nil
}

// withValidation bounds and validates each request that matches an
// operation of the spec; unmatched paths go on to the mux's 404. It runs
// after authentication, so only a tenant ever sees a validation message.
func (s *Server) withValidation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := s.mux.Handler(r)
		route := s.checker.routes[pattern]
		if route == nil {
			next.ServeHTTP(w, r)
			return
		}
		options, upload := s.checker.options, isUpload(route.Operation)
		var body []byte
		if upload {
			options = s.checker.bodyless
		} else {
			var err error
			if body, err = readBody(w, r, s.cfg.MaxBodyBytes); err != nil {
				s.writeError(w, err)
				return
			}
			if len(body) > 0 && r.Header.Get("Content-Type") == "" {
				// Many HTTP libraries send JSON without saying so; every
				// JSON route takes only JSON, so assume it.
				r.Header.Set("Content-Type", "application/json")
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		in := &openapi3filter.RequestValidationInput{
			Request:    r,
			PathParams: pathParams(route.Path, r.URL.EscapedPath()),
			Route:      route,
			Options:    options,
		}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			s.writeError(w, badRequest("%s", describeValidation(err)))
			return
		}
		if !upload {
			// The validator consumed the body; the handler reads it again.
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads a JSON body up to limit bytes and checks that it is one
// well-formed JSON value, so malformed input gets a short message naming
// the byte offset instead of the validator's dump. An empty body is
// returned as is: the spec says whether the operation needs one.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, badRequest("reading the request body: %s", oneLine(err))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("request body is not valid JSON: %s", jsonError(err, dec.InputOffset()))
	}
	if end := dec.InputOffset(); !atEOF(dec) {
		return nil, badRequest("request body has more data after its JSON value at byte %d", end)
	}
	return body, nil
}

// atEOF says whether nothing but white space follows the decoded value.
func atEOF(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}

// jsonError says what is wrong with a JSON body and where.
func jsonError(err error, offset int64) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends early"
	}
	return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(err.Error(), "json: "), offset)
}

// pathParams matches an escaped request path against a spec path such as
// /v1/sessions/{id}/exec and returns the values of its {params}. The mux
// has already matched the same pattern, so the segments line up.
func pathParams(template, path string) map[string]string {
	params := map[string]string{}
	want := strings.Split(template, "/")
	got := strings.Split(path, "/")
	if len(want) != len(got) {
		return params
	}
	for i, seg := range want {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			v, err := url.PathUnescape(got[i])
			if err != nil {
				v = got[i]
			}
			params[seg[1:len(seg)-1]] = v
		}
	}
	return params
}

// describeValidation turns the validator's error, which spans lines and
// dumps the schema, into one line that names the field and the bound:
// "limits.memory_bytes: number must be at least 4194304".
func describeValidation(err error) string {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return oneLine(err)
	}
	where := "request body"
	if p := re.Parameter; p != nil {
		where = p.In + " parameter " + p.Name
	}
	var se *openapi3.SchemaError
	if errors.As(re.Err, &se) {
		if ptr := se.JSONPointer(); re.Parameter == nil && len(ptr) > 0 {
			where = fieldName(ptr)
		}
		return where + ": " + plainNumbers(se.Reason)
	}
	var pe *openapi3filter.ParseError
	if errors.As(re.Err, &pe) {
		return where + ": " + oneLine(pe)
	}
	reason := re.Reason
	if re.Err != nil {
		reason = oneLine(re.Err)
	}
	if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) && re.RequestBody != nil {
		reason = "is required"
	}
	return where + ": " + reason
}

// sciNumber is a number the validator printed in e-notation.
var sciNumber = regexp.MustCompile(`-?\d+(\.\d+)?e[+-]\d+`)

// plainNumbers rewrites e-notation bounds ("at least 4.194304e+06") as
// the plain numbers the spec states ("at least 4194304").
func plainNumbers(reason string) string {
	return sciNumber.ReplaceAllStringFunc(reason, func(n string) string {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return n
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	})
}

// fieldName writes a JSON pointer as a field path: limits.memory_bytes,
// command[2], env.HOME.
func fieldName(ptr []string) string {
	var b strings.Builder
	for _, p := range ptr {
		if p != "" && strings.Trim(p, "0123456789") == "" && b.Len() > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
