package server

import (
	"fmt"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	apispec "github.com/warden-sandbox/warden/api"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestSessionStatesMatchSpec holds the spec's SessionState enum to
// sandbox.States, the one list of states (metrics report it too), in
// order: a state added on one side only would reach clients unnoticed.
func TestSessionStatesMatchSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPIYAML)
	if err != nil {
		t.Fatalf("loading the spec: %v", err)
	}
	ref := doc.Components.Schemas["SessionState"]
	if ref == nil || ref.Value == nil {
		t.Fatal("the spec has no SessionState schema")
	}
	var want []string
	for _, v := range ref.Value.Enum {
		want = append(want, fmt.Sprint(v))
	}
	var got []string
	for _, s := range sandbox.States {
		got = append(got, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("sandbox.States = %q, want the spec's SessionState enum %q", got, want)
	}
}
