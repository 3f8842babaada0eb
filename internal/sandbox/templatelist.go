package sandbox

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/interp"
)

// ListTemplates describes every root a session may name, for the front
// ends' listings (GET /v1/templates, MCP's list_templates): the host's
// first, with the languages the host has, then ts's by name (none when
// ts is nil: a server without a store).
func ListTemplates(ts Templates) ([]TemplateInfo, error) {
	out := []TemplateInfo{{Name: HostTemplate, Languages: interp.Available("")}}
	if ts == nil {
		return out, nil
	}
	infos, err := ts.List()
	if err != nil {
		return nil, fmt.Errorf("listing templates: %w", err)
	}
	for _, i := range infos {
		if i.Name != HostTemplate { // the store never holds it: never list it twice
			out = append(out, i)
		}
	}
	return out, nil
}
