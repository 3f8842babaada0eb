//go:build !linux

package fontcache

import (
	"errors"
	"os"
)

// RootKey is unsupported off Linux.
func RootKey(string) (Key, error) { return Key{}, errors.ErrUnsupported }

// Load is unsupported off Linux.
func (Store) Load(Key) (File, bool, error) { return File{}, false, errors.ErrUnsupported }

// Save is unsupported off Linux.
func (Store) Save(Key, File) error { return errors.ErrUnsupported }

// TryLock is unsupported off Linux.
func (Store) TryLock() (*os.File, bool, error) { return nil, false, errors.ErrUnsupported }

// ReadResult is unsupported off Linux.
func ReadResult(string) (File, error) { return File{}, errors.ErrUnsupported }
