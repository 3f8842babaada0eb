package server

import (
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	apispec "github.com/warden-sandbox/warden/api"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestLanguagesOneList: the API's Language enum (which cannot import Go)
// is interp's list, in its order, and the server accepts exactly those
// languages, naming them all when it refuses another.
func TestLanguagesOneList(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Language struct {
					Enum []string `yaml:"enum"`
				} `yaml:"Language"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(apispec.OpenAPIYAML, &doc); err != nil {
		t.Fatalf("reading api/openapi.yaml: %v", err)
	}
	if got, want := doc.Components.Schemas.Language.Enum, interp.Languages(); !slices.Equal(got, want) {
		t.Errorf("api/openapi.yaml Language enum = %v, want interp.Languages() %v", got, want)
	}
	for _, lang := range interp.Languages() {
		c := codeJSON{Language: lang, Code: "1"}
		if req, err := c.request(); err != nil || req.Language != lang {
			t.Errorf("request(language %q) = %+v, %v; want it accepted", lang, req, err)
		}
	}
	c := codeJSON{Language: "cobol", Code: "1"}
	_, err := c.request()
	if want := sandbox.UnknownLanguage("cobol").Error(); err == nil || err.Error() != want {
		t.Errorf("request(language cobol) error = %v, want %q (the one wording, naming %v)", err, want, interp.Languages())
	}
}
