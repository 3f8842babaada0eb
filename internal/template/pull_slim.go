//go:build slim

package template

import (
	"context"
	"errors"
	"io"
)

// errNotInSlim answers Pull and Import in the slim build, which leaves
// out go-containerregistry's registry client and image formats (see the
// package doc): the slim warden hands `template pull` and `template
// import` to warden-server, so no command of it reaches these.
var errNotInSlim = errors.New("pulling and importing templates is not in the slim build: run warden-server, the whole build, installed beside warden")

// PullOptions is pull.go's, whose Keychain (an authn.Keychain) the slim
// build cannot name without linking what it leaves out.
type PullOptions struct {
	Progress io.Writer
	Keychain any
}

// Pull is not in the slim build (errNotInSlim).
func (s *Store) Pull(context.Context, string, string, PullOptions) (Info, error) {
	return Info{}, errNotInSlim
}

// Import is not in the slim build (errNotInSlim).
func (s *Store) Import(context.Context, string, string) (Info, error) {
	return Info{}, errNotInSlim
}
