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
	"sync"
	"time"
)

// withValidation bounds and validates each request that matches an
// operation of the spec (see loadOperations), and bounds the body of one
// for a handler of Config.Mount (holdMounted); other paths go on to the
// mux's 404. It runs after authentication, so only a tenant ever sees a
// validation message.
func (s *Server) withValidation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := s.mux.Handler(r)
		// The body's charge is given back when the request is done, even
		// if reading or checking it panics.
		b := &body{charge: charge{budget: s.bodies, owner: owner(r)}}
		b.release = sync.OnceFunc(b.charge.release)
		defer b.release()
		if err := s.check(w, r, pattern, b); err != nil {
			s.writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// body is the charge a request's JSON body holds of the budget, and the
// func that gives it back once: when the handler has read the body, or
// when the request is done.
type body struct {
	charge  charge
	release func()
}

// check bounds and validates r, which the mux serves at pattern, charging
// its JSON body to b.
func (s *Server) check(w http.ResponseWriter, r *http.Request, pattern string, b *body) error {
	switch {
	case s.operations[pattern] != nil:
		return s.validate(w, r, s.operations[pattern], b)
	case s.cfg.Mount[pattern] != nil:
		return s.holdMounted(w, r, b)
	}
	return nil
}

// holdMounted reads the body of a request for a mounted handler (such as
// /mcp) as a JSON body is read: within MaxBodyBytes and charged to its
// key's share of MaxInFlightBodyBytes as it arrives, so a key cannot hold
// more request memory through a mounted handler than through the API. The
// handler gets the same bytes, unchecked.
func (s *Server) holdMounted(w http.ResponseWriter, r *http.Request, b *body) error {
	if r.ContentLength == 0 {
		return nil
	}
	buf, err := s.readCharged(w, r, &b.charge, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	s.setReadDeadline(w, time.Time{})
	r.Body = &heldBody{rest: buf, release: b.release}
	return nil
}

// validate checks r's parameters and JSON body against op. A JSON body is
// read in full first, bounded in size, in the bytes its tenant may hold at
// once (readCharged, charged to b) and in shape (prescan), so a flood
// cannot exhaust memory; r's body is replaced by the same bytes for the
// handler, which gives back the body's share of MaxInFlightBodyBytes once
// it has read it to the end.
//
// An upload's body is a stream the handler bounds itself, and is left
// alone; so is any body sent to an operation that takes none, which its
// handler never reads.
func (s *Server) validate(w http.ResponseWriter, r *http.Request, op *operation, b *body) error {
	if op.body == nil || op.body.upload {
		return op.checkParams(r)
	}
	buf, value, err := s.readBody(w, r, &b.charge)
	if errors.Is(err, errBlankBody) && !op.body.required {
		// Neither absent nor JSON: a body that may be left out is sent
		// empty or as a value, as OpenAPI readers (kin-openapi) take it.
		return badRequest("request body: is only white space: send a JSON object, or no body for the defaults")
	}
	if err != nil && !errors.Is(err, errBlankBody) {
		return err
	}
	r.Body = &heldBody{rest: buf, release: b.release}
	if err := op.checkParams(r); err != nil {
		return err
	}
	return op.checkBody(r.Header.Get("Content-Type"), buf != nil, value)
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

// checkBody checks a JSON body, given as decoded by readBody, for an
// operation that takes one.
func (op *operation) checkBody(contentType string, present bool, value any) error {
	b := op.body
	switch {
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

// readBody reads a JSON body of up to MaxBodyBytes, charged to c as it
// arrives, and decodes it, with numbers kept as written so int64 bounds
// compare exactly. Before it is decoded, prescan refuses a body no request
// schema could match in shape, as decoding multiplies its size in memory.
// It checks that the body is one well-formed JSON value, so malformed
// input gets a short message naming the byte offset. An empty body is
// returned as nil: the spec says whether the operation needs one.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, c *charge) ([]byte, any, error) {
	if r.ContentLength == 0 {
		return nil, nil, nil
	}
	body, err := s.readCharged(w, r, c, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	// The body is all here: clear its deadline, which must not cut the
	// connection under a long exec.
	s.setReadDeadline(w, time.Time{})
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, errBlankBody
	}
	if err := s.shape.prescan(body); err != nil {
		return nil, nil, err
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

// errBlankBody is readBody's answer for a body of white space only,
// which an operation that needs a body refuses as missing.
var errBlankBody = errors.New("request body: only white space")

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
