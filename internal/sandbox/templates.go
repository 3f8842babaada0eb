package sandbox

import (
	"errors"
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"slices"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// HostTemplate is the name of the host's own root, the default: a
// session asking for it, or for no template, runs on the host's /usr.
const HostTemplate = "host"

// TemplateName is how answers name the template of a session: "host" for
// the host's root, which the Manager leaves "", as requests name it; the
// one mapping every front end uses.
func TemplateName(name string) string {
	if name == "" {
		return HostTemplate
	}
	return name
}

// TemplateInfo describes a template a session may run on.
type TemplateInfo struct {
	Name    string
	Digest  string
	Size    int64
	Created time.Time
	// Languages are those whose interpreter the template's root holds
	// (interp.Available).
	Languages []string
}

// Templates is where a Manager finds the templates sessions name: the
// operator's template store, which tenants only use. Each template says
// which tenants (owners) may use it (template.Template.UsableBy); one an
// owner may not use is, to that owner, a template that does not exist.
type Templates interface {
	// Resolve gives the spec.Root of name for a session of owner and a
	// release func; while not released, the store must not delete the
	// template's tree (Remove refuses or defers). A template owner may
	// not use is template.ErrNotFound, with a missing one's message.
	Resolve(name, owner string) (spec.Root, func(), error)
	// List describes every template owner may use, by name.
	List(owner string) ([]TemplateInfo, error)
}

// resolveTemplate gives the root a session asking for template name runs
// on for owner, and the release of its lease (a no-op for the host's
// root).
func (m *Manager) resolveTemplate(name, owner string) (spec.Root, func(), error) {
	if name == "" || name == HostTemplate {
		return spec.Root{}, func() {}, nil
	}
	if m.cfg.Templates == nil {
		return spec.Root{}, nil, fmt.Errorf("%w: template %q: this server has no template store, so only %q is served", spec.ErrInvalid, name, HostTemplate)
	}
	root, release, err := m.cfg.Templates.Resolve(name, owner)
	if errors.Is(err, template.ErrNotFound) {
		return spec.Root{}, nil, fmt.Errorf("%w: %w", spec.ErrInvalid, err)
	}
	if err != nil {
		m.cfg.Logger.Error("resolving a template", "template", name, "err", err)
		return spec.Root{}, nil, fmt.Errorf("resolving template %q: %w", name, err)
	}
	if err := root.Validate(); err != nil {
		release()
		return spec.Root{}, nil, err
	}
	return root, release, nil
}

// checkLanguage refuses code in a language whose interpreter the
// session's root lacks, naming the template and what it offers.
func checkLanguage(root spec.Root, language string) error {
	if root.Template == "" {
		return nil // the host's: interp.New says what is missing
	}
	have := interp.Available(root.Dir)
	if slices.Contains(have, language) || !slices.Contains(interp.Languages(), language) {
		return nil // interp.New names the languages it knows
	}
	offers := "none of Warden's languages"
	if len(have) > 0 {
		offers = strings.Join(have, ", ")
	}
	return fmt.Errorf("%w: template %q has no %s interpreter: it offers %s; use another template or language", ErrUnsupported, root.Template, language, offers)
}

// templateGone is what a recovered session's reason adds when the
// template it ran on is no longer in the store, or no longer its
// owner's to use ("" when it is, or the session ran on the host's root).
func (m *Manager) templateGone(name, owner string) string {
	if name == "" || m.cfg.Templates == nil {
		return ""
	}
	_, release, err := m.cfg.Templates.Resolve(name, owner)
	if err != nil {
		return fmt.Sprintf("; its template %q is gone from the store", name)
	}
	release()
	return ""
}
