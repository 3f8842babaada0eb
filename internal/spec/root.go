package spec

import "path"

// Root is the read-only root tree a sandbox runs on. The zero Root is the
// host's own (its /usr, /bin, /lib...), today's default; a template gives
// the tree of an image from the template store instead, so a sandbox can
// run the interpreters and libraries the image holds without installing
// them on the host.
type Root struct {
	// Template is the template's name, for labels, messages and crash
	// recovery; "" means the host's root.
	Template string
	// Dir is the absolute path of the template's read-only root tree
	// (template.Template.Root): a bind source for native, gVisor's bundle
	// root, the source of a Docker image.
	Dir string
	// Digest is the image's manifest digest: labels and Docker image
	// cache keys, so a re-pulled name is never confused with the old one.
	Digest string
	// Env is the image config's environment (PATH, LANG, ...), put under
	// Warden's base environment: Warden's HOME, USER, TMPDIR... and the
	// Spec's own Env win over it.
	Env []string
}

// IsHost says the root is the host's own, not a template's.
func (r *Root) IsHost() bool { return r.Template == "" }

// Validate refuses a root a backend could not use safely: a template
// without a directory (or a directory without a template's name), a
// directory that is not absolute and clean (a relative or ".." path
// would depend on the backend's working directory), and malformed Env.
func (r *Root) Validate() error {
	if r.Template == "" {
		if r.Dir != "" || r.Digest != "" || len(r.Env) > 0 {
			return invalid("root directory %q is given without a template name: name the template, or give neither for the host's root", r.Dir)
		}
		return nil
	}
	if r.Dir == "" {
		return invalid("template %q has no root directory: resolve it from the template store", r.Template)
	}
	if !path.IsAbs(r.Dir) || path.Clean(r.Dir) != r.Dir {
		return invalid("template %q has root directory %q, which is not an absolute clean path", r.Template, r.Dir)
	}
	if r.Dir == "/" {
		return invalid("template %q has the host's / as its root directory: use no template for the host's root", r.Template)
	}
	for _, kv := range r.Env {
		if validateEnv(kv) != nil {
			return invalid("template %q has image environment %q, which is not KEY=VALUE with a name and no NUL byte: fix the image's ENV", r.Template, kv)
		}
	}
	return nil
}
