package server

import (
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// templateJSON is the spec's Template.
type templateJSON struct {
	Name      string     `json:"name"`
	Digest    string     `json:"digest,omitempty"`
	SizeBytes *int64     `json:"size_bytes,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	Languages []string   `json:"languages"`
}

type templateListJSON struct {
	Templates []templateJSON `json:"templates"`
}

// ListTemplates answers the templates a session or run may name: the
// host's root first, then those of the operator's store
// (Config.Templates) the key's tenant may use; the API has no route that
// changes it.
func (a api) ListTemplates(w http.ResponseWriter, r *http.Request) {
	out, err := a.s.templates(owner(r))
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// templates lists the host's root and the store's templates owner may
// use.
func (s *Server) templates(owner string) (templateListJSON, error) {
	infos, err := sandbox.ListTemplates(s.cfg.Templates, owner)
	if err != nil {
		return templateListJSON{}, err
	}
	out := templateListJSON{Templates: make([]templateJSON, 0, len(infos))}
	for _, i := range infos {
		t := templateJSON{Name: i.Name, Digest: i.Digest, Languages: interp.KnownOf(i.Languages)}
		if i.Name != sandbox.HostTemplate {
			size, created := i.Size, i.Created
			t.SizeBytes, t.CreatedAt = &size, &created
		}
		out.Templates = append(out.Templates, t)
	}
	return out, nil
}
