//go:build !linux

package hostid

import "errors"

// Lease is one id from the pool; there are none off Linux.
type Lease struct{}

// ID is unreachable off Linux.
func (*Lease) ID() int { return -1 }

// Take fails off Linux: the pool is Linux's locks in /run.
func Take() (*Lease, error) { return nil, errors.ErrUnsupported }

// Release is unreachable off Linux.
func (*Lease) Release() {}
