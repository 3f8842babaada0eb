package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	apispec "github.com/warden-sandbox/warden/api"
)

// TestLoadSpec loads the real spec: it fails when api/openapi.yaml starts
// using something the validator does not check, and when its operations
// and the mux's routes no longer line up.
func TestLoadSpec(t *testing.T) {
	ops, err := loadOperations(apispec.OpenAPIYAML)
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	routes, err := specRoutes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(ops)), slices.Sorted(maps.Keys(routes)); !slices.Equal(got, want) {
		t.Errorf("operations:\ngot  %q\nwant %q (as kin-openapi reads the spec)", got, want)
	}
	h := newHarness(t, nil)
	for pattern, op := range ops {
		method, path, _ := strings.Cut(pattern, " ")
		req := httptest.NewRequest(method, strings.ReplaceAll(path, "{id}", "ses_x"), nil)
		if _, served := h.srv.mux.Handler(req); served != pattern {
			t.Errorf("%s is served by the mux pattern %q", pattern, served)
		}
		if strings.Contains(path, "{id}") && !slices.ContainsFunc(op.params, func(p param) bool { return p.in == "path" && p.name == "id" }) {
			t.Errorf("%s: no path parameter id", pattern)
		}
	}
	if b := ops["PUT /v1/sessions/{id}/files"].body; b == nil || !b.upload || !b.required {
		t.Errorf("upload: got body %+v, want a required upload", b)
	}
	if b := ops["POST /v1/sessions"].body; b == nil || b.upload || !b.required || !b.schema.closed {
		t.Errorf("create: got body %+v, want a required JSON object without unknown fields", b)
	}
}

// specWith is a small spec whose one operation has parameters params, a
// body of mediaType and a property n of schema n.
func specWith(params, mediaType, n string) string {
	return fmt.Sprintf(`openapi: 3.0.3
paths:
  /x/{id}:
    post:
      parameters: %s
      requestBody:
        required: true
        content:
          %s:
            schema: {$ref: "#/components/schemas/Body"}
      responses: {}
components:
  schemas:
    Body:
      type: object
      additionalProperties: false
      properties:
        n: %s
`, params, mediaType, n)
}

const idParam = `[{name: id, in: path, required: true, schema: {type: string}}]`

func TestLoadSpecRejectsWhatItCannotCheck(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"exclusive bound", specWith(idParam, "application/json", `{type: number, minimum: 1, exclusiveMinimum: true}`),
			`components.schemas.Body.properties.n: keyword "exclusiveMinimum" is not supported by the request validator`},
		{"oneOf", specWith(idParam, "application/json", `{oneOf: [{type: string}]}`),
			`keyword "oneOf" is not supported`},
		{"no type", specWith(idParam, "application/json", `{description: anything}`),
			`type "" is not supported`},
		{"string format", specWith(idParam, "application/json", `{type: string, format: date-time}`),
			`keyword "format" is not supported by the request validator for type string`},
		{"integer format", specWith(idParam, "application/json", `{type: integer, format: int32}`),
			`format "int32" is not supported for type integer`},
		{"bound of another type", specWith(idParam, "application/json", `{type: integer, maxLength: 3}`),
			`keyword "maxLength" is not supported by the request validator for type integer`},
		{"bad pattern", specWith(idParam, "application/json", `{type: string, pattern: "("}`),
			`properties.n.pattern: error parsing regexp`},
		{"array without items", specWith(idParam, "application/json", `{type: array}`),
			`an array needs items`},
		{"non-string enum", specWith(idParam, "application/json", `{type: string, enum: [1]}`),
			`enum[0]: must be a string`},
		{"ref with a bound beside it", specWith(idParam, "application/json", `{$ref: "#/components/schemas/Body", maxProperties: 1}`),
			`keyword "maxProperties" is not supported`},
		{"missing ref", specWith(idParam, "application/json", `{$ref: "#/components/schemas/Nope"}`),
			`$ref "#/components/schemas/Nope": no such component`},
		{"remote ref", specWith(idParam, "application/json", `{$ref: "other.yaml#/Body"}`),
			`only #/components/schemas/<name> is supported`},
		{"header parameter", specWith(`[{name: id, in: path, required: true, schema: {type: string}}, {name: X, in: header, schema: {type: string}}]`, "application/json", `{type: string}`),
			`parameters in "header" are not supported`},
		{"integer parameter", specWith(`[{name: id, in: path, required: true, schema: {type: integer}}]`, "application/json", `{type: string}`),
			`parameters of type integer are not supported`},
		{"parameter style", specWith(`[{name: id, in: path, required: true, style: label, schema: {type: string}}]`, "application/json", `{type: string}`),
			`keyword "style" is not supported`},
		{"undeclared path parameter", specWith(`[]`, "application/json", `{type: string}`),
			`the path's parameters ["id"] are not all declared`},
		{"form body", specWith(idParam, "application/x-www-form-urlencoded", `{type: string}`),
			`media type "application/x-www-form-urlencoded" is not supported`},
		{"openapi 3.1", strings.Replace(specWith(idParam, "application/json", `{type: string}`), "3.0.3", "3.1.0", 1),
			`only 3.0 is supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadOperations([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
	if _, err := loadOperations([]byte(specWith(idParam, "application/json", `{type: string}`))); err != nil {
		t.Errorf("the base spec of these cases does not load: %v", err)
	}
}

// TestCheckNumberIsExact compares int64 values next to a bound that a
// float64 cannot tell apart from them.
func TestCheckNumberIsExact(t *testing.T) {
	ops, err := loadOperations([]byte(specWith(idParam, "application/json",
		`{type: integer, format: int64, minimum: -9007199254740992, maximum: 9007199254740992}`)))
	if err != nil {
		t.Fatal(err)
	}
	n := ops["POST /x/{id}"].body.schema.properties["n"]
	unbounded := *n
	unbounded.minimum, unbounded.maximum = nil, nil
	tests := []struct {
		s     *schema
		value string
		want  string
	}{
		{n, "9007199254740992", ""},
		{n, "9007199254740993", "number must be at most 9007199254740992"},
		{n, "-9007199254740993", "number must be at least -9007199254740992"},
		{n, "1e2", ""},
		{n, "1.5", "value must be an integer"},
		{n, "1e400", "number must be at most 9007199254740992"},
		{&unbounded, "9223372036854775807", ""},
		{&unbounded, "9223372036854775808", "number must fit in a 64-bit integer"},
	}
	for _, tt := range tests {
		got := ""
		if err := tt.s.check(json.Number(tt.value), "n"); err != nil {
			got = err.reason
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.value, got, tt.want)
		}
	}
}
