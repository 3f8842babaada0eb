//go:build slim

package template

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errNotInSlim answers Pull and Import in the slim build, which leaves
// out go-containerregistry's registry client and image formats (see the
// package doc): the slim warden hands `template pull` and `template
// import` to warden-server, so no command of it reaches these.
// It wraps errors.ErrUnsupported, so callers can tell "not in this
// build" from a failed pull.
var errNotInSlim = fmt.Errorf("pulling and importing templates is not in the slim build: run warden-server, the whole build, installed beside warden: %w", errors.ErrUnsupported)

// PullOptions is defined twice on purpose: this one only keeps callers
// of Pull compiling under the slim tag (tests and tools built with
// -tags slim). pull.go's, the one Pull reads, types Keychain as an
// authn.Keychain and carries test hooks of the registry client; naming
// authn here would link the Docker credential helpers the slim build
// exists to leave out, so Keychain is an any that Pull never reads.
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
