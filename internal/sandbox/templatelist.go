package sandbox

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/interp"
)

// ListTemplates describes every root a session of owner may name, for
// the front ends' listings (GET /v1/templates, MCP's list_templates): the
// host's first, with the languages the host has, then those of ts owner
// may use, by name (none when ts is nil: a server without a store).
func ListTemplates(ts Templates, owner string) ([]TemplateInfo, error) {
	out := []TemplateInfo{{Name: HostTemplate, Languages: interp.Available("")}}
	if ts == nil {
		return out, nil
	}
	infos, err := ts.List(owner)
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
