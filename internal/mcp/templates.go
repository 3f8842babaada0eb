package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// listTemplatesIn filters the listing; every field is optional.
type listTemplatesIn struct {
	Language string `json:"language,omitempty" jsonschema:"list only the templates with an interpreter for this language (python, bash or javascript); omit for all"`
}

type templateOut struct {
	Name      string   `json:"name" jsonschema:"pass this as create_session's template"`
	Languages []string `json:"languages" jsonschema:"the languages run_code can run in a session on this template"`
	SizeBytes int64    `json:"size_bytes,omitempty" jsonschema:"bytes of files in the template (absent for host)"`
}

type listTemplatesOut struct {
	Templates []templateOut `json:"templates"`
}

// listTemplatesDescription is list_templates' description. The tool is
// always listed, with or without a store, and the templates are named in
// its answer rather than in create_session's description, so the tool
// list stays the same while the operator adds and removes templates.
const listTemplatesDescription = `List the templates create_session can start a session from: each is a root filesystem with its own installed software (for example a Python with pandas and scikit-learn), named by name, with the languages run_code can run on it. "host" is the default: the server's own software.
Call it before create_session when the work needs software the default may not have.
Example: {} or {"language": "python"}`

// listTemplates answers the host's root and the server's templates the
// caller's tenant may use.
func (t *tools) listTemplates(_ context.Context, req *sdk.CallToolRequest, in listTemplatesIn) (*sdk.CallToolResult, listTemplatesOut, error) {
	if in.Language != "" && !interp.Known(in.Language) {
		return nil, listTemplatesOut{}, fmt.Errorf("list_templates: language %q is unknown: use %s", in.Language, strings.Join(interp.Languages(), ", "))
	}
	infos, err := sandbox.ListTemplates(t.opts.Templates, t.owner(req))
	if err != nil {
		return nil, listTemplatesOut{}, wardenError("list_templates", err)
	}
	out := listTemplatesOut{Templates: []templateOut{}}
	var lines []string
	for _, i := range infos {
		have := interp.KnownOf(i.Languages)
		if in.Language != "" && !slices.Contains(have, in.Language) {
			continue
		}
		out.Templates = append(out.Templates, templateOut{Name: i.Name, Languages: have, SizeBytes: i.Size})
		lines = append(lines, fmt.Sprintf("%s (%s)", i.Name, describeLanguages(have)))
	}
	text := "no template offers " + in.Language
	if len(lines) > 0 {
		text = "templates: " + strings.Join(lines, "; ") + `. Pass one as create_session's template ("host" is the default).`
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}

func describeLanguages(have []string) string {
	if len(have) == 0 {
		return "no run_code language; run_command only"
	}
	return strings.Join(have, ", ")
}
