package template

import (
	"os"
	"strings"
	"testing"
)

// TestNamePatternEverywhere: the OpenAPI schema states NamePattern
// itself, so the API refuses exactly the names ValidName does.
func TestNamePatternEverywhere(t *testing.T) {
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "TemplateName:\n      type: string\n      pattern: \"" + NamePattern + "\""
	if !strings.Contains(string(b), want) {
		t.Errorf("api/openapi.yaml: TemplateName's pattern is not template.NamePattern %q; write it there", NamePattern)
	}
}
