//go:build !linux

package template

import "errors"

// Lease is Linux-only, like the store.
func (s *Store) Lease(name string) (Template, func(), error) {
	return Template{}, nil, errors.ErrUnsupported
}

func (s *Store) holdForRemoval(string) (func(), error) { return nil, errors.ErrUnsupported }
