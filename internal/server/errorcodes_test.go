package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	apispec "github.com/warden-sandbox/warden/api"
)

// TestErrorCodesMatchSpec holds the server's error codes to the spec's
// ErrorCode enum, both ways: the server no longer takes them from
// generated constants (apigen has no body models), so a code renamed or
// added on one side only would otherwise reach clients unnoticed.
func TestErrorCodesMatchSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPIYAML)
	if err != nil {
		t.Fatalf("loading the spec: %v", err)
	}
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("the spec has no ErrorCode schema")
	}
	var want []string
	for _, v := range ref.Value.Enum {
		want = append(want, fmt.Sprint(v))
	}
	got := []string{codeBadRequest, codeUnauthorized, codeNotFound, codeConflict, codeTimeout,
		codePayloadTooLarge, codeTooMany, codeInternal, codeUnsupported, codeUnavailable, codeStorage}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("server error codes = %q, want the spec's ErrorCode enum %q", got, want)
	}
}
