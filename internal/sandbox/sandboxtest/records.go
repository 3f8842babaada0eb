// Package sandboxtest holds what the fakes of sandbox.Sessions in the
// front ends' tests (the HTTP server's, the E2B control plane's) share,
// so that every fake keeps the Manager's tenancy rule one way.
package sandboxtest

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Record is one session of a fake: its owner and the Info it answers.
type Record struct {
	Owner string
	Info  sandbox.Info
}

// Records is a fake's sessions by id. Each is its owner's alone: to
// anyone else its id is missing (sandbox.ErrNotFound), as the Manager
// answers, so the front ends' tests see the tenancy rule. It is not safe
// for concurrent use: the fake holding it locks around every call.
type Records map[string]*Record

// Find returns owner's session id.
func (r Records) Find(owner, id string) (*Record, error) {
	s, ok := r[id]
	if !ok || s.Owner != owner {
		return nil, fmt.Errorf("%w: no session %q", sandbox.ErrNotFound, id)
	}
	return s, nil
}

// Get returns the Info of owner's session id.
func (r Records) Get(owner, id string) (sandbox.Info, error) {
	s, err := r.Find(owner, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return s.Info, nil
}

// List returns the Info of each of owner's sessions, in no order.
func (r Records) List(owner string) []sandbox.Info {
	var out []sandbox.Info
	for _, s := range r {
		if s.Owner == owner {
			out = append(out, s.Info)
		}
	}
	return out
}

// Delete forgets owner's session id.
func (r Records) Delete(owner, id string) error {
	if _, err := r.Find(owner, id); err != nil {
		return err
	}
	delete(r, id)
	return nil
}
