//go:build !linux

package template

import "errors"

// lock is Linux-only, like the store.
func (s *Store) lock() (func(), error) { return nil, errors.ErrUnsupported }
