package e2b

import (
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"net/http"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// storeFake is a sandbox.Templates holding two templates, "pandas" (every
// owner's) and "mine" (only alice's), and counting the leases it gave
// and got back.
type storeFake struct{ leased, released *int }

func (s storeFake) Resolve(name, owner string) (spec.Root, func(), error) {
	if name != "pandas" && (name != "mine" || owner != "alice") {
		return spec.Root{}, nil, fmt.Errorf("%w %q", template.ErrNotFound, name)
	}
	*s.leased++
	return spec.Root{Template: name, Dir: "/nonexistent"}, func() { *s.released++ }, nil
}

func (s storeFake) List(string) ([]sandbox.TemplateInfo, error) {
	return []sandbox.TemplateInfo{{Name: "pandas"}}, nil
}

// TestCreateSandboxTemplate: E2B's default ids run on the host's root, a
// stored template's name on that template, and any other id is E2B's 404
// for a missing template, with or without a store.
func TestCreateSandboxTemplate(t *testing.T) {
	tests := []struct {
		name, id string
		store    bool
		status   int
		want     string // the session's template, or in the error message
		key      string // ctlKeyAlice when empty
	}{
		{"base", "base", true, 201, "", ""},
		{"code interpreter", "code-interpreter-v1", true, 201, "", ""},
		{"stored", "pandas", true, 201, "pandas", ""},
		{"missing", "numpy", true, 404, `template "numpy" not found`, ""},
		{"no store", "pandas", false, 404, `template "pandas" not found`, ""},
		{"hostile id", "../../etc\n", true, 404, `template "../../etc\n" not found`, ""},
		{"alice's own", "mine", true, 201, "mine", ""},
		{"alice's, to bob", "mine", true, 404, `template "mine" not found`, ctlKeyBob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var leased, released int
			_, f, h := newControlServer(t, func(c *Config) {
				if tt.store {
					c.Templates = storeFake{&leased, &released}
				}
			})
			key := tt.key
			if key == "" {
				key = ctlKeyAlice
			}
			w := controlCall(h, "POST", "/v2/sandboxes", key, fmt.Sprintf(`{"templateID":%q}`, tt.id))
			if tt.status != http.StatusCreated {
				errorBody(t, w, tt.status, tt.want)
				return
			}
			if w.Code != http.StatusCreated {
				t.Fatalf("create = %d %s, want 201", w.Code, w.Body)
			}
			if got := f.lastOptions.Template; got != tt.want {
				t.Errorf("SessionOptions.Template = %q, want %q", got, tt.want)
			}
			if leased != released {
				t.Errorf("%d leases taken, %d given back: the check must not hold the template", leased, released)
			}
		})
	}
}
