//go:build !linux

package kubebed

import (
	"errors"
	"net/netip"
	"os"
)

// relay is a Pod's TCP-to-unix relay, which needs Linux here.
type relay struct{}

// newRelay fails off Linux, where the bed runs no boxed Pods.
func newRelay(netip.AddrPort) (*relay, *os.File, error) { return nil, nil, errors.ErrUnsupported }

// serve is unreachable off Linux (newRelay fails).
func (*relay) serve() {}

// close is unreachable off Linux (newRelay fails).
func (*relay) close() {}
