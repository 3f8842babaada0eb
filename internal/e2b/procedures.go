package e2b

import (
	"fmt"
	"net/http"
	"path"
	"slices"

	"github.com/warden-sandbox/warden/internal/spec"
)

// knownProcedures serves h for the procedures of service (their full
// paths, as the generated code names them) and answers any other path with
// a Connect unimplemented error that names it and lists the procedures
// there are, rather than a bare 404. The list in the message is built from
// procedures, so it cannot drift from what is served.
func knownProcedures(service string, procedures []string, h http.Handler) http.Handler {
	names := make([]string, len(procedures))
	for i, p := range procedures {
		names[i] = path.Base(p)
	}
	use := spec.OrList(names)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(procedures, r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		writeConnectError(w, http.StatusNotFound, "unimplemented",
			fmt.Sprintf("%.100q is not a procedure of %s: use %s", r.URL.Path, service, use))
	})
}
