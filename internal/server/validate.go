package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// withValidation bounds and validates each request that matches an
// operation of the spec (see loadOperations); unmatched paths go on to
// the mux's 404. It runs after authentication, so only a tenant ever sees
// a validation message.
func (s *Server) withValidation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := s.mux.Handler(r)
		if op := s.operations[pattern]; op != nil {
			if err := s.validate(w, r, op); err != nil {
				s.writeError(w, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// validate checks r's parameters and JSON body against op. A JSON body is
// read in full first (bounded, so a flood cannot exhaust memory), and r's
// body is replaced by the same bytes for the handler; an upload's body is
// a stream the handler bounds itself, and is left alone.
func (s *Server) validate(w http.ResponseWriter, r *http.Request, op *operation) error {
	if op.body != nil && op.body.upload {
		return op.checkParams(r)
	}
	body, value, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := op.checkParams(r); err != nil {
		return err
	}
	return op.checkBody(r.Header.Get("Content-Type"), body != nil, value)
}

// checkParams checks every path and query parameter op declares. Every
// value of a repeated query parameter is checked.
func (op *operation) checkParams(r *http.Request) error {
	path := pathParams(op.path, r.URL.EscapedPath())
	query := r.URL.Query()
	for _, p := range op.params {
		where := p.in + " parameter " + p.name
		values := query[p.name]
		if p.in == "path" {
			values = nil
			if v, ok := path[p.name]; ok {
				values = []string{v}
			}
		}
		if len(values) == 0 && p.required {
			return badRequest("%s: value is required but missing", where)
		}
		for _, raw := range values {
			var v any = raw
			if p.schema.typ == "boolean" {
				b, err := strconv.ParseBool(raw)
				if err != nil {
					return badRequest("%s: value must be a boolean (true or false)", where)
				}
				v = b
			}
			if err := p.schema.check(v, ""); err != nil {
				return err.in(where)
			}
		}
	}
	return nil
}

// checkBody checks a JSON body, given as decoded by readBody. An
// operation without a request body ignores any body sent.
func (op *operation) checkBody(contentType string, present bool, value any) error {
	b := op.body
	switch {
	case b == nil:
		return nil
	case !present && b.required:
		return badRequest("request body: is required")
	case !present:
		return nil
	}
	// Many HTTP libraries send JSON without saying so, so no Content-Type
	// is taken as JSON; a different one is a mistake worth naming.
	if contentType != "" {
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
			return badRequest("request body: header Content-Type has unexpected value %q; send application/json", contentType)
		}
	}
	if err := b.schema.check(value, ""); err != nil {
		return err.in("request body")
	}
	return nil
}

// readBody reads a JSON body up to limit bytes and decodes it, with
// numbers kept as written so int64 bounds compare exactly. It checks that
// the body is one well-formed JSON value, so malformed input gets a short
// message naming the byte offset. An empty body is returned as nil: the
// spec says whether the operation needs one.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, any, error) {
	if r.ContentLength > limit {
		return nil, nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, tooLarge(limit)
		}
		return nil, nil, badRequest("reading the request body: %s", oneLine(err))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, badRequest("request body is not valid JSON: %s", jsonError(err, dec.InputOffset()))
	}
	if end := dec.InputOffset(); !atEOF(dec) {
		return nil, nil, badRequest("request body has more data after its JSON value at byte %d", end)
	}
	return body, v, nil
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
