package e2b

import (
	"errors"
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"net/http"
	"slices"
	"strings"
)

// EnvdVersion is the envd version every sandbox reports. E2B's SDK
// (e2b@2.51.0) gates features on it: below 0.1.0 it refuses the sandbox,
// below 0.4.0 it sends user "user" on every call, and it needs 0.3.0 for
// stdin: false, 0.5.2 for closeStdin, 0.5.7 for octet-stream uploads,
// 0.6.2 for file metadata (user.e2b.* xattrs), 0.6.3 for watch events with
// entries and 0.6.4 for watching network mounts; nothing above. 0.6.4
// turns all of them on: Warden serves all but file metadata, which /files
// refuses with its own one-line error, and a sandbox has no network
// mounts to watch, so allowing them changes nothing.
const EnvdVersion = "0.6.4"

// clientID fills the deprecated clientID field E2B's schemas still
// require.
const clientID = "warden"

// templates are the E2B template ids that name the server's own root
// (Warden's "host"): "base" (the e2b package's default) and
// "code-interpreter-v1" (@e2b/code-interpreter's). Every other id names a
// template of the operator's store (Config.Templates).
var templates = []string{"base", "code-interpreter-v1"}

// knownTemplate says whether id is one of templates.
func knownTemplate(id string) bool { return slices.Contains(templates, id) }

// templateList names the templates for an error message.
func templateList() string { return `"` + strings.Join(templates, `", "`) + `"` }

// templateOf is the Warden template a sandbox of templateID runs on: ""
// (the host's root) for E2B's default ids, else the stored template of
// that name. An id the store lacks, or holds but owner may not use, is
// answered as E2B answers a missing template: 404, "template ... not
// found".
func (s *Server) templateOf(id, owner string) (string, error) {
	switch {
	case knownTemplate(id):
		return "", nil
	case id == "":
		return "", badRequest("templateID: is required: use one of %s or a template of this server (warden template ls)", templateList())
	}
	if s.cfg.Templates != nil {
		_, release, err := s.cfg.Templates.Resolve(id, owner)
		if err == nil {
			release() // the Manager takes its own lease for the session
			return id, nil
		}
		if !errors.Is(err, template.ErrNotFound) {
			return "", fmt.Errorf("resolving template %q: %w", id, err)
		}
	}
	return "", &controlError{http.StatusNotFound, fmt.Sprintf("template %q not found: use one of %s or a template of this server (warden template ls on the server, GET /v1/templates on Warden's API)", id, templateList())}
}
