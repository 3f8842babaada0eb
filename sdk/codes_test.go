package sdk

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestEveryErrorCodeDocumented walks the spec's ErrorCode enum and checks
// each code has an SDK sentinel and a row in api/README.md's table, so a
// code added to the spec cannot be forgotten in either.
func TestEveryErrorCodeDocumented(t *testing.T) {
	raw, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `yaml:"enum"`
				} `yaml:"ErrorCode"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parsing the spec: %v", err)
	}
	codes := doc.Components.Schemas.ErrorCode.Enum
	if len(codes) == 0 {
		t.Fatal("the spec's ErrorCode enum is empty or missing")
	}
	readme, err := os.ReadFile("../api/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sentinels := map[ErrorCode]bool{}
	for _, e := range []*APIError{ErrBadRequest, ErrUnauthorized, ErrNotFound, ErrConflict, ErrRequestTimeout,
		ErrPayloadTooLarge, ErrTooManySessions, ErrUnsupported, ErrInternal, ErrUnavailable, ErrInsufficientStorage} {
		sentinels[e.Code] = true
	}
	for _, code := range codes {
		if !sentinels[ErrorCode(code)] {
			t.Errorf("code %q has no Err* sentinel in sdk/errors.go", code)
		}
		if !strings.Contains(string(readme), "| `"+code+"` |") {
			t.Errorf("code %q has no row in api/README.md's error table", code)
		}
	}
}
