package mcp

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fakeTemplates is a sandbox.Templates with fixed contents.
type fakeTemplates struct {
	infos []sandbox.TemplateInfo
	err   error
	// only maps a template to the one owner that may use it (absent:
	// every owner's).
	only map[string]string
}

func (f fakeTemplates) Resolve(string, string) (spec.Root, func(), error) {
	return spec.Root{}, nil, errors.ErrUnsupported
}

func (f fakeTemplates) List(owner string) ([]sandbox.TemplateInfo, error) {
	return slices.DeleteFunc(slices.Clone(f.infos), func(i sandbox.TemplateInfo) bool {
		o, mine := f.only[i.Name]
		return mine && o != owner
	}), f.err
}

func TestMCPListTemplates(t *testing.T) {
	store := fakeTemplates{infos: []sandbox.TemplateInfo{
		{Name: "pandas", Digest: "sha256:abc", Size: 99, Created: time.Now(), Languages: []string{"bash", "python"}},
		{Name: "tools", Languages: nil},
	}}
	onlyOther, onlyMCP := store, store
	onlyOther.only = map[string]string{"pandas": "0123456789abcdef"}
	onlyMCP.only = map[string]string{"pandas": "mcp"}
	host := interp.Available("")
	tests := []struct {
		name      string
		store     sandbox.Templates
		args      map[string]any
		want      []string // names
		isError   bool
		inMessage string
	}{
		{"no store: host only", nil, map[string]any{}, []string{"host"}, false, "host ("},
		{"store", store, map[string]any{}, []string{"host", "pandas", "tools"}, false, "pandas (bash, python); tools (no run_code language"},
		{"filtered by language", store, map[string]any{"language": "python"}, append(ifHas(host, "python", []string{"host"}), "pandas"), false, "pandas (bash, python)"},
		{"another tenant's template is not listed", onlyOther, map[string]any{}, []string{"host", "tools"}, false, "templates: host ("},
		{"the caller's own template", onlyMCP, map[string]any{}, []string{"host", "pandas", "tools"}, false, "pandas (bash, python)"},
		{"unknown language", store, map[string]any{"language": "cobol"}, nil, true, "language"},
		{"store fails", fakeTemplates{err: errors.New("store unreadable")}, map[string]any{}, nil, true, "store unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := connect(t, newFake(t), Options{Owner: "mcp", Templates: tt.store})
			res := call(t, cs, "list_templates", tt.args)
			msg := text(t, res)
			if res.IsError != tt.isError || !strings.Contains(msg, tt.inMessage) {
				t.Fatalf("got isError %v %q, want isError %v and a text containing %q", res.IsError, msg, tt.isError, tt.inMessage)
			}
			if tt.isError {
				return
			}
			var out listTemplatesOut
			remarshal(t, res.StructuredContent, &out)
			var got []string
			for _, tpl := range out.Templates {
				got = append(got, tpl.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("names: got %v, want %v", got, tt.want)
			}
		})
	}
}

// ifHas is then when have holds lang, else nothing: the host is listed
// for a language only where this machine has its interpreter.
func ifHas(have []string, lang string, then []string) []string {
	if slices.Contains(have, lang) {
		return then
	}
	return nil
}

func TestMCPCreateSessionTemplate(t *testing.T) {
	tests := []struct {
		name, template string
		isError        bool
		inMessage      string
	}{
		{"default", "", false, "on template host"},
		{"stored", "pandas", false, "on template pandas"},
		{"unknown", "nope", true, `template "nope" is not in the store; list_templates names`},
		{"malformed", "../etc", true, "template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			cs, _ := connect(t, f, Options{Owner: "mcp"})
			args := map[string]any{}
			if tt.template != "" {
				args["template"] = tt.template
			}
			res := call(t, cs, "create_session", args)
			msg := text(t, res)
			if res.IsError != tt.isError || !strings.Contains(msg, tt.inMessage) || strings.Contains(msg, "\n") {
				t.Fatalf("got isError %v %q, want isError %v and one line containing %q", res.IsError, msg, tt.isError, tt.inMessage)
			}
			if tt.isError {
				return
			}
			if f.options.Template != tt.template {
				t.Errorf("SessionOptions.Template: got %q, want %q", f.options.Template, tt.template)
			}
			var out sessionOut
			remarshal(t, res.StructuredContent, &out)
			if want := sandbox.TemplateName(tt.template); out.Template != want {
				t.Errorf("structured template: got %q, want %q", out.Template, want)
			}
		})
	}
}
