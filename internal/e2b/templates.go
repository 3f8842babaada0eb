package e2b

import (
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

// templates are the E2B template ids this server serves: "base" (the e2b
// package's default) and "code-interpreter-v1" (@e2b/code-interpreter's).
// Each is a Warden session with Config.Limits; Warden has no custom
// templates yet.
var templates = []string{"base", "code-interpreter-v1"}

// knownTemplate says whether id is one of templates.
func knownTemplate(id string) bool { return slices.Contains(templates, id) }

// templateList names the templates for an error message.
func templateList() string { return `"` + strings.Join(templates, `", "`) + `"` }
