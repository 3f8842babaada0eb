package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
)

// openTemplates opens the template store under stateDir for sandboxes to
// use, refusing a store that does not exist rather than making an empty
// one: only `warden template` adds templates.
func openTemplates(stateDir string) (storeTemplates, error) {
	if stateDir == "none" || stateDir == "" {
		return storeTemplates{}, errors.New(`templates live in the state directory: pass --state-dir DIR (not "none")`)
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return storeTemplates{}, fmt.Errorf("--state-dir %q: %w", stateDir, err)
	}
	dir := filepath.Join(abs, "templates")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return storeTemplates{}, fmt.Errorf("no template store at %s: add a template with warden template pull or import, or pass the --state-dir that holds one", dir)
	}
	s, err := template.Open(dir, template.Options{})
	if err != nil {
		return storeTemplates{}, err
	}
	return storeTemplates{s}, nil
}

// storeTemplates serves a template store to the Manager and to warden
// run (sandbox.Templates).
type storeTemplates struct{ s *template.Store }

// Resolve leases the template called name for a session of owner (see
// template.Store.LeaseFor): one owner may not use answers as a missing
// one.
func (t storeTemplates) Resolve(name, owner string) (spec.Root, func(), error) {
	tpl, release, err := t.s.LeaseFor(name, owner)
	if err != nil {
		return spec.Root{}, nil, err
	}
	return rootOf(tpl), release, nil
}

// operatorResolve leases the template called name whoever it is shared
// with: warden run is the operator's, who may use every template.
func (t storeTemplates) operatorResolve(name string) (spec.Root, func(), error) {
	tpl, release, err := t.s.Lease(name)
	if err != nil {
		return spec.Root{}, nil, err
	}
	return rootOf(tpl), release, nil
}

// List describes every stored template owner may use, with the
// languages its root has.
func (t storeTemplates) List(owner string) ([]sandbox.TemplateInfo, error) {
	infos, err := t.s.ListFor(owner)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.TemplateInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, sandbox.TemplateInfo{
			Name: i.Name, Digest: i.Digest, Size: i.Size, Created: i.Created, Languages: interp.Available(i.Root),
		})
	}
	return out, nil
}

// rootOf is the spec.Root a sandbox on tpl runs on.
func rootOf(tpl template.Template) spec.Root {
	return spec.Root{Template: tpl.Name, Dir: tpl.Root, Digest: tpl.Digest, Env: tpl.Config.Env}
}
