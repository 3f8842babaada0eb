package template

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Everyone is the SharedWith entry that lets every tenant use a
// template: what pull and import record, as the operator's templates are
// every tenant's to use.
const Everyone = "all"

// Keyless is how listings name the tenant of a server without API keys,
// whose owner id is "": every client of such a server is that tenant.
const Keyless = "keyless"

// tenantRE is what a tenant named in --share-with may be: an API key's
// tenant id (16 hex digits, the owner in warden serve's request log) or
// another fixed owner such as warden mcp's.
var tenantRE = regexp.MustCompile(`^[a-z0-9]{1,64}$`)

// UsableBy says whether tenant may list a template and start sessions on
// it: one shared with Everyone or with tenant. A template recorded before
// Warden kept visibility (no SharedWith) is every tenant's, as all were
// then. Front ends answer a template tenant may not use exactly as a
// missing one, so its name tells nothing.
func (t Template) UsableBy(tenant string) bool {
	return len(t.SharedWith) == 0 || slices.Contains(t.SharedWith, Everyone) || slices.Contains(t.SharedWith, tenant)
}

// ParseShare reads a --share-with value: "all", or tenant ids separated
// by commas. It never yields an empty list, so a commit always says whom
// it shares with.
func ParseShare(v string) ([]string, error) {
	if strings.TrimSpace(v) == Everyone {
		return []string{Everyone}, nil
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == Everyone:
			return nil, fmt.Errorf("--share-with %q: %q stands alone (every tenant); drop the other tenants or it", v, Everyone)
		case !tenantRE.MatchString(t):
			return nil, fmt.Errorf("--share-with %q: tenant %q: use a tenant id (1-64 of a-z, 0-9: the owner in warden serve's request log) or %q", v, t, Everyone)
		case !slices.Contains(out, t):
			out = append(out, t)
		}
	}
	return out, nil
}

// ShareText names whom a template is shared with, for listings: "all",
// or its tenants separated by commas, the keyless server's as Keyless.
func (t Template) ShareText() string {
	if len(t.SharedWith) == 0 {
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
// being removed does not say so either.
func (s *Store) LeaseFor(name, tenant string) (Template, func(), error) {
	if t, err := s.Get(name); err == nil && !t.UsableBy(tenant) {
		return Template{}, nil, notFound(name)
	}
	t, release, err := s.Lease(name)
	if err != nil {
		return Template{}, nil, err
	}
	if !t.UsableBy(tenant) { // replaced between the check and the lease
		release()
		return Template{}, nil, notFound(name)
	}
	return t, release, nil
}

// ListFor is List with only the templates tenant may use.
func (s *Store) ListFor(tenant string) ([]Info, error) {
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(i Info) bool { return !i.UsableBy(tenant) }), nil
}
