package template

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Everyone is the SharedWith entry that lets every tenant use a
// template: what pull and import record, as the operator's templates are
// every tenant's to use.
const Everyone = "all"

// Keyless is how listings name the tenant of a server without API keys,
// whose owner id is "": every client of such a server is that tenant.
// ParseShare reads it back as "", so it is never a tenant id itself.
const Keyless = "keyless"

// unsetShare is what listings say of a commit recorded before Warden
// kept whom a template is shared with: no tenant may use it until the
// operator runs warden template share.
const unsetShare = "unset (committed before sharing was recorded)"

// tenantRE is what a tenant named in --share-with may be: an API key's
// tenant id (16 hex digits, the owner in warden serve's request log) or
// another fixed owner such as warden mcp's.
var tenantRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]{1,64}$`) })

// Committed says t was made by Commit: its Ref is its base's name (a
// bare template name), where a pull's is an image reference (with '/',
// ':' or '@' once it names a registry, repository path, tag or digest)
// and an import's is empty. An untagged pull of a bare name ("alpine")
// looks the same, so where it matters (UsableBy) it is taken as a commit:
// failing closed costs the operator one warden template share.
func (t Template) Committed() bool {
	return t.Ref != "" && !strings.ContainsAny(t.Ref, "/:@")
}

// UsableBy says whether tenant may list a template and start sessions on
// it: one shared with Everyone or with tenant. A record without
// SharedWith (made before Warden kept it, or by a writer that forgot it)
// is every tenant's if it was pulled or imported, as the operator's, and
// no tenant's if it is a commit, whose files are one session's: the
// operator's own commands still use it, and warden template share sets
// it. Front ends answer a template tenant may not use exactly as a
// missing one, so its name tells nothing.
func (t Template) UsableBy(tenant string) bool {
	if len(t.SharedWith) == 0 {
		return !t.Committed()
	}
	return slices.Contains(t.SharedWith, Everyone) || slices.Contains(t.SharedWith, tenant)
}

// ParseShare reads whom to share a template with (commit's --share-with,
// template share's argument): "all", or tenant ids separated by commas,
// Keyless naming the keyless server's tenant (""). It never yields an
// empty list, so a template always says whom it is shared with.
func ParseShare(v string) ([]string, error) {
	if strings.TrimSpace(v) == Everyone {
		return []string{Everyone}, nil
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if t == Everyone {
			return nil, fmt.Errorf("sharing with %q: %q stands alone (every tenant); drop the other tenants or it", v, Everyone)
		}
		if t != Keyless && !tenantRE().MatchString(t) {
			return nil, fmt.Errorf("sharing with %q: tenant %q: use a tenant id (1-64 of a-z, 0-9: the owner in warden serve's request log), %q or %q", v, t, Keyless, Everyone)
		}
		if t == Keyless {
			t = ""
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// validShare refuses a SharedWith list no tenant reading it could mean:
// empty, Everyone beside tenants, or a tenant that is not a tenant id or
// the keyless server's "" (the literal Keyless is a listing's word for
// "", never an id). Every write of a template's metadata checks it.
func validShare(name string, shareWith []string) error {
	if len(shareWith) == 0 {
		return fmt.Errorf("template %q: no tenant to share it with: name the session's tenant, or %q", name, Everyone)
	}
	for _, t := range shareWith {
		switch {
		case t == Everyone && len(shareWith) > 1:
			return fmt.Errorf("template %q: %q stands alone (every tenant); drop the other tenants or it", name, Everyone)
		case t == Keyless:
			return fmt.Errorf("template %q: %q is a listing's name for the keyless server's tenant, not a tenant id: share with \"\"", name, Keyless)
		case t != "" && t != Everyone && !tenantRE().MatchString(t):
			return fmt.Errorf("template %q: tenant %q: use a tenant id (1-64 of a-z, 0-9)", name, t)
		}
	}
	return nil
}

// ShareText names whom a template is shared with, for listings: "all",
// or its tenants separated by commas, the keyless server's as Keyless; a
// commit without a record says it is unset.
func (t Template) ShareText() string {
	if len(t.SharedWith) == 0 {
		if t.Committed() {
			return unsetShare
		}
		return Everyone
	}
	names := make([]string, len(t.SharedWith))
	for i, s := range t.SharedWith {
		names[i] = s
		if s == "" {
			names[i] = Keyless
		}
	}
	return strings.Join(names, ",")
}

// LeaseFor leases template name for a sandbox of tenant (see Lease): a
// template tenant may not use is ErrNotFound with the very error a
// missing one gets, checked before the lease so that a hidden template
// being removed does not say so either. A template whose metadata cannot
// be read is logged and answered as missing too: whether tenant may use
// it cannot be known, and the store's failure is the operator's to read.
func (s *Store) LeaseFor(name, tenant string) (Template, func(), error) {
	t, err := s.Get(name)
	if err != nil {
		return Template{}, nil, s.hiddenError(name, err)
	}
	if !t.UsableBy(tenant) {
		return Template{}, nil, notFound(name)
	}
	t, release, err := s.Lease(name)
	if err != nil {
		return Template{}, nil, s.hiddenError(name, err)
	}
	if !t.UsableBy(tenant) { // replaced between the check and the lease
		release()
		return Template{}, nil, notFound(name)
	}
	return t, release, nil
}

// hiddenError is what a tenant is told of a failure to get template
// name: a client's ErrNotFound as it is; anything else logged for the
// operator and answered as a missing template.
func (s *Store) hiddenError(name string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return err
	}
	s.o.Log.Warn("template unusable by tenants: its metadata cannot be read", "template", name, "err", err)
	return notFound(name)
}

// ListFor is List with only the templates tenant may use. A template
// whose metadata cannot be read is logged and left out, so one broken
// template neither hides the others nor puts its name in a tenant's
// error.
func (s *Store) ListFor(tenant string) ([]Info, error) {
	all, err := s.list(func(name string, err error) error {
		s.o.Log.Warn("template left out of a tenant's list: its metadata cannot be read", "template", name, "err", err)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(i Info) bool { return !i.UsableBy(tenant) }), nil
}
